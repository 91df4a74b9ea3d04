// Package deploy holds the deployment files: a kustomize base
// (kubernetes/base), a Helm chart (helm/headroom) and a docker-compose stack
// (compose). Each carries copies of the alert rules and dashboards, because
// kustomize, Helm and Grafana's provisioning all read files only from their
// own tree; `go generate ./deploy` writes the copies and the tests keep them
// identical to alerts/ and dashboards/.
package deploy

//go:generate go run ./gen
