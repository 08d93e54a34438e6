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
