{{- define "weir-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "weir-operator.labels" -}}
app.kubernetes.io/name: weir-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "weir-operator.selector" -}}
app.kubernetes.io/name: weir-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "weir-operator.serviceAccount" -}}
{{- default (include "weir-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
