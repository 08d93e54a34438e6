// Prints, for each selector, the message kube-scheduler v1.34 puts in the InterPodAffinity
// PreFilter status ("parsing pod: %+v", pkg/scheduler/framework/plugins/interpodaffinity/filtering.go)
// when framework.NewPodInfo fails on a required anti-affinity term (pkg/scheduler/framework/types.go).
// Regenerate expected.tsv: cd tests/simulator/upstream/labelerrors && GOFLAGS=-mod=mod go run . > expected.tsv
package main

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

func show(name string, sel *metav1.LabelSelector) {
	_, err := metav1.LabelSelectorAsSelector(sel)
	var parseErrs []error
	if err != nil {
		parseErrs = append(parseErrs, fmt.Errorf("requiredAntiAffinityTerms: %w", err))
	}
	agg := utilerrors.NewAggregate(parseErrs)
	fmt.Printf("%s\t%s\n", name, fmt.Sprintf("parsing pod: %+v", agg))
}

func main() {
	show("space", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"web server"}}}})
	show("long", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}}})
	show("badkey", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "-app", Operator: "Exists"}}})
	show("twovals", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"a b", "-c"}}}})
	show("matchlabels", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web/1"}})
	show("emptyin", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In"}}})
	show("prefix", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "Example.com/app", Operator: "Exists"}}})
	show("slashes", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a/b/c", Operator: "Exists"}}})
	show("emptyname", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "example.com/", Operator: "Exists"}}})
	show("emptyprefix", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "/app", Operator: "Exists"}}})
	show("longbad", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}}})
	show("existsvals", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Exists", Values: []string{"x"}}}})
	show("keyandval", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a b", Operator: "In", Values: []string{"x y"}}}})
	show("unicode", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"caf\u00e9\t\"q\""}}}})
	show("longkey", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Operator: "Exists"}}})
	show("badop", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Gt", Values: []string{"1"}}}})
}
