{{/* Names and labels. */}}
{{- define "peloton.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "peloton.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: peloton
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "resmgr") */}}
{{- define "peloton.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "peloton.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "peloton.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "peloton.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the API's tokens file: the given one, or the chart's (api-tokens.yaml). */}}
{{- define "peloton.apiTokensSecret" -}}
{{- .Values.api.tokensSecret.name | default (printf "%s-api-tokens" (include "peloton.fullname" .)) -}}
{{- end -}}

{{/* Where mounted Secrets go (the services read the file paths from the environment). */}}
{{- define "peloton.kafkaTlsDir" -}}/etc/peloton/kafka-tls{{- end -}}
{{- define "peloton.etcdTlsDir" -}}/etc/peloton/etcd-tls{{- end -}}
{{- define "peloton.stateDir" -}}/var/lib/peloton{{- end -}}

{{/* The partitioned services the chart runs as StatefulSets when `<name>.partitioned`:
     the co-partitioned topics of each (its own topics and its inbox, peloton.bus.routing's
     Route: they need one partition count) and the catalog's default count of those topics
     (peloton.bus.catalog; tests/chart checks both against the code). A new partitioned
     service is one more entry here and in control-plane.yaml's list. */}}
{{- define "peloton.partitionedServices" -}}
jobmgr:
  topics: [job-submitted, job-kill-requested, job-update-requested, job-events, tasks-admitted,
           placement-made, jobmgr-inbox]
  defaultPartitions: 4
hostmgr:
  topics: [host-registered, task-status-reported, task-launch-requested,
           host-maintenance-requested, host-events, hostmgr-inbox]
  defaultPartitions: 4
placement:
  topics: [tasks-admitted]
  defaultPartitions: 4
{{- end -}}

{{/* Is component `name` partitioned: (dict "root" $ "name" "jobmgr") -> "true" or "". */}}
{{- define "peloton.isPartitioned" -}}
{{- $known := include "peloton.partitionedServices" .root | fromYaml -}}
{{- if and (hasKey $known .name) (index .root.Values .name).partitioned -}}true{{- end -}}
{{- end -}}

{{/* PELOTON_TOPIC_PARTITIONS from topics.partitions (topic -> count), sorted: "a=8,b=8"
     (empty: the catalog's counts). Fails on a count that is not a positive integer, and
     when a partitioned service's co-partitioned topics would get different counts (the
     service would refuse to start: peloton.bus.routing.check_copartitioned). Topic names
     are checked by the services' own parser (peloton.bus.partitions; the topics hook
     fails first). */}}
{{- define "peloton.topicPartitions" -}}
{{- $counts := .Values.topics.partitions | default dict -}}
{{- $items := list -}}
{{- range $name := keys $counts | sortAlpha -}}
{{- $count := toString (index $counts $name) -}}
{{- if not (regexMatch "^[1-9][0-9]*$" $count) -}}
{{- fail (printf "topics.partitions.%s must be a positive integer, not %q" $name $count) -}}
{{- end -}}
{{- $items = append $items (printf "%s=%s" $name $count) -}}
{{- end -}}
{{- range $service, $spec := (include "peloton.partitionedServices" . | fromYaml) -}}
{{- if include "peloton.isPartitioned" (dict "root" $ "name" $service) -}}
{{- $got := dict -}}
{{- $seen := dict -}}
{{- range $t := $spec.topics -}}
{{- $n := toString (index $counts $t | default $spec.defaultPartitions) -}}
{{- $_ := set $got $t $n -}}
{{- $_ := set $seen $n true -}}
{{- end -}}
{{- if gt (len $seen) 1 -}}
{{- $pairs := list -}}
{{- range $t := $spec.topics -}}
{{- $pairs = append $pairs (printf "%s=%s" $t (index $got $t)) -}}
{{- end -}}
{{- fail (printf "topics.partitions: %s is partitioned, so its co-partitioned topics need one partition count (a topic not listed has the catalog's %v); got %s" $service $spec.defaultPartitions (join ", " $pairs)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- join "," $items -}}
{{- end -}}

{{/* The shared settings as a flat map: the ConfigMap's data, and the inline env of the
     topics hook (which runs before the ConfigMap exists). Validates the security values. */}}
{{- define "peloton.configData" -}}
{{- $k := .Values.kafka -}}
{{- $sec := $k.security -}}
{{- $protocols := list "PLAINTEXT" "SSL" "SASL_PLAINTEXT" "SASL_SSL" -}}
{{- if not (has $sec.protocol $protocols) -}}
{{- fail (printf "kafka.security.protocol must be one of %s, not %q" (join ", " $protocols) $sec.protocol) -}}
{{- end -}}
{{- $sasl := hasPrefix "SASL_" $sec.protocol -}}
{{- $tls := or (eq $sec.protocol "SSL") (eq $sec.protocol "SASL_SSL") -}}
{{- if and $sasl (not (and $sec.sasl.username $sec.sasl.passwordSecret.name)) -}}
{{- fail (printf "kafka.security.protocol %s needs kafka.security.sasl.username and kafka.security.sasl.passwordSecret.name" $sec.protocol) -}}
{{- end -}}
{{- if and $sec.tls.secretName (not $tls) -}}
{{- fail (printf "kafka.security.tls.secretName is set but kafka.security.protocol is %s (SSL or SASL_SSL uses it)" $sec.protocol) -}}
{{- end -}}
{{- if ne (empty $sec.tls.certKey) (empty $sec.tls.keyKey) -}}
{{- fail "kafka.security.tls.certKey and kafka.security.tls.keyKey go together" -}}
{{- end -}}
{{- if ne (empty .Values.etcd.tls.certKey) (empty .Values.etcd.tls.keyKey) -}}
{{- fail "etcd.tls.certKey and etcd.tls.keyKey go together" -}}
{{- end -}}
PELOTON_BOOTSTRAP: {{ required "kafka.bootstrap is required" $k.bootstrap | quote }}
PELOTON_BROKER_KIND: {{ $k.brokerKind | quote }}
PELOTON_KAFKA_SESSION_TIMEOUT_S: {{ $k.sessionTimeoutSeconds | quote }}
PELOTON_KAFKA_SECURITY_PROTOCOL: {{ $sec.protocol | quote }}
{{- if $sasl }}
PELOTON_KAFKA_SASL_MECHANISM: {{ $sec.sasl.mechanism | quote }}
PELOTON_KAFKA_SASL_USERNAME: {{ $sec.sasl.username | quote }}
{{- end }}
{{- if and $tls $sec.tls.secretName }}
{{- with $sec.tls.caKey }}
PELOTON_KAFKA_SSL_CA_FILE: {{ printf "%s/%s" (include "peloton.kafkaTlsDir" $) . | quote }}
{{- end }}
{{- if $sec.tls.certKey }}
PELOTON_KAFKA_SSL_CERT_FILE: {{ printf "%s/%s" (include "peloton.kafkaTlsDir" .) $sec.tls.certKey | quote }}
PELOTON_KAFKA_SSL_KEY_FILE: {{ printf "%s/%s" (include "peloton.kafkaTlsDir" .) $sec.tls.keyKey | quote }}
{{- end }}
{{- end }}
PELOTON_TOPIC_REPLICATION: {{ .Values.topics.replication | quote }}
{{- with (include "peloton.topicPartitions" .) }}
PELOTON_TOPIC_PARTITIONS: {{ . | quote }}
{{- end }}
{{- if .Values.topics.minInsyncReplicas }}
PELOTON_TOPIC_MIN_INSYNC_REPLICAS: {{ .Values.topics.minInsyncReplicas | quote }}
{{- end }}
PELOTON_EVENT_RETENTION_MS: {{ .Values.topics.eventRetentionMs | int64 | quote }}
PELOTON_SNAPSHOT_RETENTION_MS: {{ .Values.topics.snapshotRetentionMs | int64 | quote }}
PELOTON_ETCD: {{ required "etcd.endpoint is required (resmgr leader election)" .Values.etcd.endpoint | quote }}
{{- with .Values.etcd.tls }}
{{- if .secretName }}
{{- with .caKey }}
PELOTON_ETCD_CA_FILE: {{ printf "%s/%s" (include "peloton.etcdTlsDir" $) . | quote }}
{{- end }}
{{- if .certKey }}
PELOTON_ETCD_CERT_FILE: {{ printf "%s/%s" (include "peloton.etcdTlsDir" $) .certKey | quote }}
PELOTON_ETCD_KEY_FILE: {{ printf "%s/%s" (include "peloton.etcdTlsDir" $) .keyKey | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.clickhouse.dsnSecret.name }}
PELOTON_CLICKHOUSE_DSN: {{ required "clickhouse.dsn is required" .Values.clickhouse.dsn | quote }}
{{- end }}
PELOTON_LOG_LEVEL: {{ .Values.logLevel | quote }}
PELOTON_LOG_FORMAT: {{ .Values.logFormat | quote }}
PELOTON_STOP_TIMEOUT_S: {{ .Values.stopTimeoutSeconds | quote }}
PELOTON_STATE_DIR: {{ include "peloton.stateDir" . | quote }}
PYTHONUNBUFFERED: "1"
{{- end -}}

{{/* Environment entries from Secrets (the SASL password), shared by every container. */}}
{{- define "peloton.secretEnv" -}}
{{- $sec := .Values.kafka.security -}}
{{- if hasPrefix "SASL_" $sec.protocol }}
- name: PELOTON_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $sec.sasl.passwordSecret.name }}
      key: {{ $sec.sasl.passwordSecret.key }}
{{- end }}
{{- end -}}

{{/* Shared environment: the ConfigMap, the pod name (the services' --instance), Secrets. */}}
{{- define "peloton.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "peloton.fullname" . }}
env:
  - name: POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
{{- with (include "peloton.secretEnv" .) }}
{{- . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Volumes every pod gets: scratch emptyDirs, and the TLS Secrets when set. */}}
{{- define "peloton.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratch.tmpSizeLimit }}
- name: state
  emptyDir:
    sizeLimit: {{ .Values.scratch.stateSizeLimit }}
{{- with .Values.kafka.security.tls.secretName }}
- name: kafka-tls
  secret:
    secretName: {{ . }}
    defaultMode: 0440
{{- end }}
{{- with .Values.etcd.tls.secretName }}
- name: etcd-tls
  secret:
    secretName: {{ . }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{- define "peloton.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: state
  mountPath: {{ include "peloton.stateDir" . }}
{{- if .Values.kafka.security.tls.secretName }}
- name: kafka-tls
  mountPath: {{ include "peloton.kafkaTlsDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.etcd.tls.secretName }}
- name: etcd-tls
  mountPath: {{ include "peloton.etcdTlsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* readinessProbe /readyz and livenessProbe /healthz on a named port: (dict "root" $ "port" "health") */}}
{{- define "peloton.probes" -}}
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  {{- toYaml .root.Values.probes.readiness | nindent 2 }}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ .port }}
  {{- toYaml .root.Values.probes.liveness | nindent 2 }}
{{- end -}}

{{- define "peloton.podSpecCommon" -}}
{{- $stop := .Values.stopTimeoutSeconds -}}
{{- $grace := .Values.terminationGracePeriodSeconds -}}
{{- if or (lt (float64 $stop) 0.0) (and (gt (float64 $stop) 0.0) (ge (float64 $stop) (float64 $grace))) -}}
{{- fail (printf "stopTimeoutSeconds (%v) must be 0 or more and below terminationGracePeriodSeconds (%v): a service past its stop deadline exits by itself, with a log line, before Kubernetes kills it" $stop $grace) -}}
{{- end -}}
serviceAccountName: {{ include "peloton.serviceAccountName" . }}
terminationGracePeriodSeconds: {{ $grace }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* The pod template of a control-plane service (a Deployment's or a StatefulSet's):
     (dict "root" $ "c" (dict "name" "jobmgr" "values" .Values.jobmgr "args" (list ...))) */}}
{{- define "peloton.controlPlanePodTemplate" -}}
{{- $root := .root -}}
{{- $c := .c -}}
{{- $sel := dict "root" $root "component" $c.name -}}
metadata:
  labels:
    {{- include "peloton.selectorLabels" $sel | nindent 4 }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    {{- with $root.Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with (include "peloton.podSpecCommon" $root) }}{{- . | nindent 2 }}{{- end }}
  {{- if $root.Values.affinity }}
  affinity:
    {{- toYaml $root.Values.affinity | nindent 4 }}
  {{- else if gt (int $c.values.replicas) 1 }}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "peloton.selectorLabels" $sel | nindent 16 }}
  {{- end }}
  containers:
    - name: {{ $c.name }}
      image: {{ include "peloton.image" $root | quote }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      command: ["python", "-m", "peloton.serve"]
      args:
        {{- toYaml $c.args | nindent 8 }}
      {{- include "peloton.env" $root | nindent 6 }}
        - name: PELOTON_HEALTH_PORT
          value: {{ $root.Values.healthPort | quote }}
      ports:
        - name: health
          containerPort: {{ $root.Values.healthPort }}
          protocol: TCP
      {{- include "peloton.probes" (dict "root" $root "port" "health") | nindent 6 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        {{- include "peloton.volumeMounts" $root | nindent 8 }}
      resources:
        {{- toYaml $c.values.resources | nindent 8 }}
  volumes:
    {{- include "peloton.volumes" $root | nindent 4 }}
{{- end -}}
