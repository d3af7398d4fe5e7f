{{- define "weir-cluster.id" -}}
{{- $id := default .Release.Name .Values.clusterId -}}
{{- if or (gt (len $id) 40) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $id)) -}}
{{- fail (printf "clusterId %q must be a DNS label of at most 40 characters" $id) -}}
{{- end -}}
{{- $id -}}
{{- end -}}

{{- define "weir-cluster.labels" -}}
app.kubernetes.io/name: weir
app.kubernetes.io/instance: {{ include "weir-cluster.id" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of a component: (dict "root" $ "component" name). */}}
{{- define "weir-cluster.selector" -}}
app.kubernetes.io/name: weir
app.kubernetes.io/instance: {{ include "weir-cluster.id" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The flags both daemons take. */}}
{{- define "weir-cluster.daemonArgs" -}}
- --ha=kubernetes
- --cluster-id={{ include "weir-cluster.id" . }}
- --kube-namespace={{ .Release.Namespace }}
{{- if .Values.tls.enabled }}
- --tls-cert=/etc/weir/tls/tls.pem
- --tls-key=/etc/weir/tls/tls-key.pem
- --tls-ca=/etc/weir/tls/ca.pem
- --tls-server-name=weir-{{ include "weir-cluster.id" . }}
{{- end }}
{{- end -}}

{{- define "weir-cluster.scheme" -}}
{{- if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* The pod spec both Deployments share, less the container. */}}
{{- define "weir-cluster.podCommon" -}}
serviceAccountName: {{ include "weir-cluster.id" . }}-weir
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  fsGroup: 65532
volumes:
  {{- if .Values.tls.enabled }}
  - name: weir-tls
    secret:
      secretName: {{ include "weir-cluster.id" . }}-weir-tls
      items:
        - {key: ca.pem, path: ca.pem}
        - {key: tls.pem, path: tls.pem}
        - {key: tls-key.pem, path: tls-key.pem}
  {{- end }}
  - name: tmp
    emptyDir: {}
  {{- with .Values.volumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{- define "weir-cluster.mounts" -}}
{{- if .Values.tls.enabled }}
- {name: weir-tls, mountPath: /etc/weir/tls, readOnly: true}
{{- end }}
- {name: tmp, mountPath: /tmp}
{{- with .Values.volumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "weir-cluster.env" -}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end -}}
