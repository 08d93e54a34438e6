{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "unstick.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name, with the chart name unless the release already holds it. */}}
{{- define "unstick.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "unstick.selectorLabels" -}}
app.kubernetes.io/name: {{ include "unstick.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "unstick.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "unstick.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "unstick.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "unstick.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "unstick.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "unstick.tokensSecretName" -}}
{{- default (printf "%s-api-tokens" (include "unstick.fullname" .)) .Values.apiTokens.existingSecret }}
{{- end }}

{{/* "true" when the embedded SQLite database is used (no URL, no URL Secret). */}}
{{- define "unstick.sqlite" -}}
{{- if and (not .Values.database.url) (not .Values.database.existingSecret) }}true{{ end }}
{{- end }}

{{- define "unstick.claimName" -}}
{{- default (printf "%s-data" (include "unstick.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* The Secret holding the database URL: the user's, or the chart's made from database.url. */}}
{{- define "unstick.dbSecretName" -}}
{{- default (printf "%s-database" (include "unstick.fullname" .)) .Values.database.existingSecret }}
{{- end }}

{{- define "unstick.dbSecretKey" -}}
{{- if .Values.database.existingSecret }}{{ .Values.database.existingSecretKey }}{{ else }}url{{ end }}
{{- end }}

{{/* Replicas: the value, else 2 with PostgreSQL and 1 with SQLite. */}}
{{- define "unstick.replicas" -}}
{{- if kindIs "invalid" .Values.replicas }}{{ if include "unstick.sqlite" . }}1{{ else }}2{{ end }}{{ else }}{{ int .Values.replicas }}{{ end }}
{{- end }}

{{- define "unstick.slackSecretName" -}}
{{- default (printf "%s-slack" (include "unstick.fullname" .)) .Values.slack.existingSecret }}
{{- end }}

{{- define "unstick.webhookSecretName" -}}
{{- default (printf "%s-webhook" (include "unstick.fullname" .)) .Values.webhook.existingSecret }}
{{- end }}

{{/* Impossible combinations, refused at install with the value named. */}}
{{- define "unstick.checks" -}}
{{- $replicas := int (include "unstick.replicas" .) }}
{{- if eq .Values.mode "sidecar" }}
{{- if not .Values.sidecar.serviceAccount.name }}
{{- fail "mode=sidecar: set sidecar.serviceAccount.name (and .namespace), the ServiceAccount of the pod the sidecar joins: it reads the cluster with that token" }}
{{- end }}
{{- if not .Values.sidecar.automountServiceAccountToken }}
{{- fail "mode=sidecar: sidecar.automountServiceAccountToken=false leaves the sidecar without a ServiceAccount token to read the cluster with" }}
{{- end }}
{{- else }}
{{- if and (gt $replicas 1) (include "unstick.sqlite" .) }}
{{- fail (printf "replicas=%d needs PostgreSQL: SQLite has one writer; set database.existingSecret (or database.url), or replicas=1" $replicas) }}
{{- end }}
{{- if and (gt $replicas 1) (not .Values.database.existingSecret) (not .Values.database.url) }}
{{- fail "replicas > 1 (high availability) needs database.existingSecret: a Secret with the PostgreSQL URL" }}
{{- end }}
{{- if and .Values.database.url (not (hasPrefix "postgresql" .Values.database.url)) }}
{{- fail "database.url: only postgresql+asyncpg://… URLs go here (SQLite is the default: leave it empty)" }}
{{- end }}
{{- if not (or .Values.apiTokens.existingSecret .Values.apiTokens.tokens) }}
{{- fail "set apiTokens.existingSecret or apiTokens.tokens: unstick serves its API only with bearer tokens" }}
{{- end }}
{{- if not .Values.serviceAccount.automountServiceAccountToken }}
{{- fail "serviceAccount.automountServiceAccountToken=false leaves the agent without a token to read the cluster with" }}
{{- end }}
{{- if and .Values.slack.webhookUrl .Values.slack.botToken }}
{{- fail "slack: set slack.webhookUrl or slack.botToken, not both" }}
{{- end }}
{{- if and .Values.slack.botToken (not .Values.slack.channel) }}
{{- fail "slack.botToken needs slack.channel (where to post)" }}
{{- end }}
{{- if and .Values.webhook.urls (not (or .Values.webhook.secret .Values.webhook.existingSecret)) }}
{{- fail "webhook.urls: set webhook.secret or webhook.existingSecret (the HMAC key the receivers verify)" }}
{{- end }}
{{- with .Values.networkPolicy }}
{{- if and .enabled (not .apiServerCIDRs) }}
{{- fail "networkPolicy.enabled: set networkPolicy.apiServerCIDRs and networkPolicy.apiServerPort, or the policy cuts the agent off from the Kubernetes API server. They are the API server's own addresses and port (NetworkPolicy sees them after the kubernetes Service is translated, so not the Service's 10.96.0.1:443): kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes -o jsonpath='{.items[*].endpoints[*].addresses[*]} {.items[0].ports[0].port}'" }}
{{- end }}
{{- if and .enabled (or $.Values.database.url $.Values.database.existingSecret) (not .databaseCIDRs) }}
{{- fail "networkPolicy.enabled with PostgreSQL: set networkPolicy.databaseCIDRs (and databasePort), or the policy cuts the agent off from its database" }}
{{- end }}
{{- if and .enabled (or $.Values.slack.webhookUrl $.Values.slack.botToken $.Values.slack.existingSecret $.Values.webhook.urls) (not .notifyCIDRs) }}
{{- fail "networkPolicy.enabled with Slack or webhooks: set networkPolicy.notifyCIDRs (and notifyPort), or the policy cuts the agent off from the receivers" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
