//go:build kubernetes

package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// Execer runs a command in a pod's container and returns what it wrote
// (stdout and stderr together) and its exit status.
type Execer interface {
	Exec(ctx context.Context, pod Pod, container string, cmd []string) (out string, status int, err error)
}

// Client is what lockbench does through the Kubernetes API: client-go's
// typed client for pods, its dynamic client for Chaos Mesh's objects, and
// the pods' exec subresource for commands.
type Client struct {
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
	Exec    Execer
	// Where says where the API server is, for messages.
	Where string
}

// New connects to a cluster: the kubeconfig file (and context) given, or
// without one the pod's own service account when lockbench runs in the
// cluster, else $KUBECONFIG or ~/.kube/config.
func New(kubeconfig, kubeContext string) (*Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" && kubeContext == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if kubeconfig != "" {
			rules.ExplicitPath = kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return &Client{Core: core, Dynamic: dyn, Exec: &apiExec{core: core, cfg: cfg}, Where: cfg.Host}, nil
}

// apiExec runs commands through the pods/exec subresource: over
// WebSocket, or SPDY where the API server does not upgrade to it (as
// kubectl exec does).
type apiExec struct {
	core kubernetes.Interface
	cfg  *rest.Config
}

func (e *apiExec) Exec(ctx context.Context, pod Pod, container string, cmd []string) (string, int, error) {
	req := e.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.cfg, "GET", req.URL().String())
	if err != nil {
		return "", 0, err
	}
	sp, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", req.URL())
	if err != nil {
		return "", 0, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", 0, err
	}
	var out bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitStatus(), nil
	}
	if err != nil {
		return out.String(), 0, fmt.Errorf("exec in %s/%s: %w", pod, container, err)
	}
	return out.String(), 0, nil
}

// Shell runs a shell command in a pod's container.
func (c *Client) Shell(ctx context.Context, pod Pod, container, cmd string) (string, int, error) {
	return c.Exec.Exec(ctx, pod, container, []string{"sh", "-c", cmd})
}

// PodState is what the API says of a pod: its uid (a pod deleted and made
// again by its StatefulSet has a new one), whether it runs with every
// container ready, and how often its containers restarted.
type PodState struct {
	UID      string
	Ready    bool
	Restarts int32
	Deleting bool
}

// State reads a pod's state; a pod that does not exist is ErrNotFound.
func (c *Client) State(ctx context.Context, pod Pod) (PodState, error) {
	p, err := c.Core.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return PodState{}, fmt.Errorf("pod %s: %w", pod, ErrNotFound)
	}
	if err != nil {
		return PodState{}, fmt.Errorf("pod %s: %w", pod, err)
	}
	st := PodState{UID: string(p.UID), Ready: p.Status.Phase == corev1.PodRunning, Deleting: p.DeletionTimestamp != nil}
	for _, cs := range p.Status.ContainerStatuses {
		st.Ready = st.Ready && cs.Ready
		st.Restarts += cs.RestartCount
	}
	return st, nil
}

// FirstContainer is the name of the pod's first container other than
// skip (the agent): the server's.
func (c *Client) FirstContainer(ctx context.Context, pod Pod, skip string) (string, error) {
	p, err := c.Core.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("pod %s: %w", pod, err)
	}
	for _, ct := range p.Spec.Containers {
		if ct.Name != skip {
			return ct.Name, nil
		}
	}
	return "", fmt.Errorf("pod %s has no container but %s", pod, skip)
}

// DeletePod deletes a pod at once (grace period 0: its containers get
// SIGKILL, as a crash); its StatefulSet makes it again.
func (c *Client) DeletePod(ctx context.Context, pod Pod) error {
	zero := int64(0)
	err := c.Core.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s: %w", pod, err)
	}
	return nil
}

// Create creates an object (a Chaos Mesh experiment).
func (c *Client) Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	if _, err := c.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// Get reads an object; one that does not exist is ErrNotFound.
func (c *Client) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	u, err := c.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s: %w", gvr.Resource, ns, name, ErrNotFound)
	}
	return u, err
}

// Delete deletes an object; one already gone is no error. Chaos Mesh
// recovers the pods (removes the rules, sets the clock right) before it
// lets the object go.
func (c *Client) Delete(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	err := c.Dynamic.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s/%s: %w", gvr.Resource, ns, name, err)
	}
	return nil
}

// DeleteManaged deletes every Chaos Mesh object lockbench made in ns
// (labelled managed-by lockbench), of run only when run is set, and
// returns their names.
func (c *Client) DeleteManaged(ctx context.Context, ns, run string) ([]string, error) {
	sel := LabelManagedBy + "=" + ManagedBy
	if run != "" {
		sel += "," + LabelRun + "=" + run
	}
	var names []string
	var errs []error
	for _, gvr := range ChaosResources {
		l, err := c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s in %s: %w", gvr.Resource, ns, err))
			continue
		}
		for _, it := range l.Items {
			if err := c.Delete(ctx, gvr, ns, it.GetName()); err != nil {
				errs = append(errs, err)
				continue
			}
			names = append(names, it.GetKind()+" "+it.GetName())
		}
	}
	return names, errors.Join(errs...)
}
