{{- define "headroom.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "headroom.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "headroom.labels" -}}
{{ include "headroom.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "headroom.secretName" -}}
{{- default (printf "%s-api-keys" (include "headroom.fullname" .)) .Values.apiKeys.existingSecret -}}
{{- end -}}

{{- /* "true" when the configuration discovers targets through the Kubernetes API. */ -}}
{{- define "headroom.discovers" -}}
{{- $k8s := false -}}
{{- range .Values.config.discovery -}}
{{- if .kubernetes_sd_configs -}}{{- $k8s = true -}}{{- end -}}
{{- end -}}
{{- $k8s -}}
{{- end -}}
