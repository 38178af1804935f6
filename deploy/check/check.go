// Package check validates deploy/compose and deploy/kubernetes offline, in
// a module of its own so that the Kubernetes API types and the Compose
// loader stay out of Fairway's go.mod. Run it with
//
//	cd deploy/check && go test ./...
//
// compose_test.go loads deploy/compose/compose.yaml with compose-go, the
// loader and schema of docker compose v2 itself, then checks what the file
// promises (healthchecks, start order, three NATS nodes). kubernetes_test.go
// decodes every manifest strictly into the Kubernetes API types (an unknown
// or misspelt field fails), then checks probes, security contexts,
// resources, Secrets, selectors and the disruption budgets; the
// CloudNativePG Cluster and the NATS Helm values are checked field by field
// against lists taken from CloudNativePG's CRD and the chart's values.yaml
// (their Go modules are not on the module proxy).
package check
