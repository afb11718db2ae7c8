//go:build kubernetes

package kube

import (
	"bytes"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Namespace is where the manifests put everything.
const Namespace = "lockbench"

// AgentContainer is the container in every server pod that lockbench runs
// its commands in: Debian with a shell and procps, sleeping, in the pod's
// one process namespace (shareProcessNamespace), so that it sees, stops
// and resumes the server's processes as the SSH control plane does on a
// host; the server images themselves may have no shell at all (etcd's and
// Consul's are a single static binary).
const AgentContainer = "lockbench-agent"

// group is one server group of the topology: a StatefulSet whose pods
// are lockbench's servers <server>-1..N (pod <name>-0 is <server>-1).
type group struct {
	name     string // StatefulSet, headless Service and container
	replicas int
	port     int32
	image    string
	// args run the server; $(POD_NAME) and $(POD_IP) are the pod's.
	command []string
	// pattern finds the server's main process (pgrep -f, in the pod).
	pattern string
}

// fqdn is pod i's stable DNS name.
func (g group) fqdn(i int) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", g.name, i, g.name, Namespace)
}

// Images: those make compose-images builds, pushed to a registry the
// cluster pulls from.
const (
	imageDebian = "lockbench/debian:bookworm"
	imageEtcd   = "lockbench/etcd:3.6.16"
	imageConsul = "lockbench/consul:1.14.11"
	imageBench  = "lockbench/bench:local"
)

// topology is compose/'s topology, as StatefulSets.
func topology() []group {
	// etcd's and Consul's images run their one binary as the entrypoint
	// (/usr/local/bin/app): the pattern is in their arguments.
	etcd := group{name: "etcd", replicas: 3, port: 2379, image: imageEtcd, pattern: "--initial-cluster-state"}
	var peers []string
	for i := 0; i < etcd.replicas; i++ {
		peers = append(peers, fmt.Sprintf("%s-%d=http://%s:2380", etcd.name, i, etcd.fqdn(i)))
	}
	etcd.command = []string{"--name", "$(POD_NAME)", "--data-dir", "/tmp/etcd",
		"--listen-client-urls", "http://0.0.0.0:2379", "--advertise-client-urls", "http://$(POD_NAME).etcd." + Namespace + ".svc.cluster.local:2379",
		"--listen-peer-urls", "http://0.0.0.0:2380", "--initial-advertise-peer-urls", "http://$(POD_NAME).etcd." + Namespace + ".svc.cluster.local:2380",
		"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new"}
	consul := group{name: "consul", replicas: 3, port: 8500, image: imageConsul, pattern: "agent -server"}
	consul.command = []string{"agent", "-server", "-bootstrap-expect=3", "-node=$(POD_NAME)", "-bind=$(POD_IP)", "-client=0.0.0.0",
		"-data-dir=/tmp/consul", "-dns-port=-1", "-log-level=warn", "-disable-host-node-id"}
	for i := 0; i < consul.replicas; i++ {
		consul.command = append(consul.command, "-retry-join="+consul.fqdn(i))
	}
	zk := group{name: "zookeeper", replicas: 3, port: 2181, image: imageDebian, pattern: "QuorumPeerMain"}
	var servers []string
	for i := 0; i < zk.replicas; i++ {
		servers = append(servers, fmt.Sprintf(`server.%d=%s:2888:3888`, i+1, zk.fqdn(i)))
	}
	zk.command = []string{"sh", "-c", `id=$((${HOSTNAME##*-}+1)) && mkdir -p /data && echo $id > /data/myid && printf "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=/data\nclientPort=2181\nquorumListenOnAllIPs=true\n4lw.commands.whitelist=srvr,ruok,mntr,conf\nadmin.enableServer=false\n` +
		strings.Join(servers, `\n`) + `\n" > /data/zoo.cfg && exec java -Xmx256m -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar org.apache.zookeeper.server.quorum.QuorumPeerMain /data/zoo.cfg`}
	return []group{
		{name: "redis", replicas: 5, port: 6379, image: imageDebian, pattern: "redis-server",
			command: []string{"redis-server", "--bind", "0.0.0.0", "--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "no"}},
		etcd, consul, zk,
		{name: "postgres", replicas: 1, port: 5432, image: imageDebian, pattern: "postgres -D",
			command: []string{"sh", "-c", `d=/tmp/pg; mkdir -p $d && chown postgres $d && B=$(ls -d /usr/lib/postgresql/*/bin | tail -1) && runuser -u postgres -- $B/initdb -D $d -A trust -U postgres --no-sync >/dev/null && echo "host all all 0.0.0.0/0 trust" >> $d/pg_hba.conf && exec runuser -u postgres -- $B/postgres -D $d -k /tmp -c listen_addresses='*' -c fsync=off`}},
	}
}

// Manifests are the Kubernetes objects of lockbench's topology, in the
// order kubectl apply -f takes them: the namespace; for each server
// group a headless Service and a StatefulSet whose pods share one
// process namespace with the agent container; the coordinator's
// ServiceAccount, Role (pods, pods/exec, Chaos Mesh's NetworkChaos and
// TimeChaos) and RoleBinding; a ConfigMap with the targets file (Targets)
// and the scenario; and the coordinator itself, `bench run` as a Job of one
// pod (a run ends; its results stay in the pod's /results until the Job
// is deleted). The worker instances run in the coordinator's pod, as its
// children, as they do with any targets file.
func Manifests(scenario string) []runtime.Object {
	ns := &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	out := []runtime.Object{ns}
	for _, g := range topology() {
		out = append(out, service(g), statefulSet(g))
	}
	sa := &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta("lockbench")}
	role := &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta("lockbench"), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"chaos-mesh.org"}, Resources: []string{"networkchaos", "timechaos"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
	}}
	rb := &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta("lockbench"),
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "lockbench"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "lockbench", Namespace: Namespace}}}
	cm := &corev1.ConfigMap{TypeMeta: typeMeta("v1", "ConfigMap"), ObjectMeta: meta("lockbench-config"),
		Data: map[string]string{"targets.yaml": Targets(), "scenario.yaml": scenario}}
	out = append(out, sa, role, rb, cm, coordinator())
	return out
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: Namespace, Labels: map[string]string{LabelManagedBy: ManagedBy, "app.kubernetes.io/name": name}}
}

func service(g group) *corev1.Service {
	return &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: meta(g.name), Spec: corev1.ServiceSpec{
		ClusterIP:                corev1.ClusterIPNone, // headless: each pod its own DNS name
		PublishNotReadyAddresses: true,                 // members find each other before they are ready
		Selector:                 map[string]string{"app.kubernetes.io/name": g.name},
		Ports:                    []corev1.ServicePort{{Name: "client", Port: g.port, TargetPort: intstr.FromInt32(g.port)}},
	}}
}

func statefulSet(g group) *appsv1.StatefulSet {
	replicas := int32(g.replicas)
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}
	server := corev1.Container{Name: g.name, Image: g.image, Args: g.command, Env: env,
		Ports: []corev1.ContainerPort{{Name: "client", ContainerPort: g.port}}}
	root := int64(0)
	agent := corev1.Container{Name: AgentContainer, Image: imageDebian, Command: []string{"sleep", "infinity"},
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root}}
	share := true
	return &appsv1.StatefulSet{TypeMeta: typeMeta("apps/v1", "StatefulSet"), ObjectMeta: meta(g.name), Spec: appsv1.StatefulSetSpec{
		ServiceName:         g.name,
		Replicas:            &replicas,
		PodManagementPolicy: appsv1.ParallelPodManagement, // a quorum's members start together
		Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": g.name}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": g.name, LabelManagedBy: ManagedBy}},
			Spec: corev1.PodSpec{
				ShareProcessNamespace: &share,
				Containers:            []corev1.Container{server, agent},
			},
		},
	}}
}

// coordinator is bench run as a Job of one pod that is never retried: a
// run that failed is reported, not repeated.
func coordinator() *batchv1.Job {
	none := int32(0)
	return &batchv1.Job{TypeMeta: typeMeta("batch/v1", "Job"), ObjectMeta: meta("lockbench-run"), Spec: batchv1.JobSpec{
		BackoffLimit: &none,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "lockbench-run", LabelManagedBy: ManagedBy}},
			Spec: corev1.PodSpec{
				ServiceAccountName: "lockbench",
				RestartPolicy:      corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "bench", Image: imageBench,
					Args: []string{"run", "-targets", "/etc/lockbench/targets.yaml", "-o", "/results", "/etc/lockbench/scenario.yaml"},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config", MountPath: "/etc/lockbench"},
						{Name: "results", MountPath: "/results"},
						{Name: "tmp", MountPath: "/tmp"},
					}}},
				Volumes: []corev1.Volume{
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "lockbench-config"}}}},
					{Name: "results", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
			},
		},
	}}
}

// Targets is the targets file of the topology: every server by the name
// lockbench's backends use (redis-1 is pod redis-0) at its pod's stable
// DNS name, with a kubernetes control section naming the pod and how to
// find the server's process in it.
func Targets() string {
	var b strings.Builder
	b.WriteString("# The servers of kube/lockbench.yaml, for bench run -targets inside the\n# cluster (the coordinator Job mounts this file). Generated: go test\n# -tags kubernetes ./internal/machinery/kube -update.\nservers:\n")
	type entry struct{ name, addr, pod, pattern string }
	var es []entry
	for _, g := range topology() {
		for i := 0; i < g.replicas; i++ {
			es = append(es, entry{fmt.Sprintf("%s-%d", g.name, i+1), fmt.Sprintf("%s:%d", g.fqdn(i), g.port), fmt.Sprintf("%s-%d", g.name, i), g.pattern})
		}
	}
	for _, e := range es {
		fmt.Fprintf(&b, "  %s: %s\n", e.name, e.addr)
	}
	b.WriteString("control:\n")
	for _, e := range es {
		fmt.Fprintf(&b, "  %s: {kubernetes: {namespace: %s, pod: %s}, pattern: %q}\n", e.name, Namespace, e.pod, e.pattern)
	}
	return b.String()
}

// YAML writes objects as one multi-document YAML file.
func YAML(objs []runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		u, err := Unstructured(o)
		if err != nil {
			return nil, err
		}
		m := u.Object
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		clean(m)
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// clean drops the empty creationTimestamp fields and resources the
// converter leaves in nested templates.
func clean(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "creationTimestamp" && x == nil {
				delete(t, k)
				continue
			}
			if k == "resources" {
				if m, ok := x.(map[string]any); ok && len(m) == 0 {
					delete(t, k)
					continue
				}
			}
			clean(x)
		}
	case []any:
		for _, x := range t {
			clean(x)
		}
	}
}
