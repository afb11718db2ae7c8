// Package kube is lockbench's Kubernetes deployment: the compose
// topology's servers as Kubernetes objects (Manifests), the Chaos Mesh
// objects the faults become there (the mapping in Actions), and a client
// (client-go) that creates, watches and deletes them and runs commands in
// the servers' pods.
//
// Everything but this comment is built only with the kubernetes build tag
// (go build -tags kubernetes; make build-kube): client-go and Chaos Mesh's
// API are large, and no Kubernetes cluster can run on lockbench's own
// machine (no registry, no Kubernetes binaries), so nothing here has run
// against a real cluster. What is tested is what can be without one: the
// manifests and every object the control mode would create (golden files
// in testdata/ and kube/lockbench.yaml), and the control mode's logic
// against client-go's fake clients.
package kube
