package telemetry

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestReadSettings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want settings
		err  string
	}{
		{"general endpoint gets /v1/traces", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318/"},
			settings{protocol: ProtocolHTTP, endpoint: "http://localhost:4318/v1/traces", service: DefaultServiceName}, ""},
		{"traces endpoint is used as is and wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/custom"},
			settings{protocol: ProtocolHTTP, endpoint: "https://b/custom", service: DefaultServiceName}, ""},
		{"grpc host:port, insecure, headers, timeout, gzip, resource", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true",
			"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=x%20y", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2", "OTEL_EXPORTER_OTLP_TIMEOUT": "1500",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,deployment.environment=ci",
			"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5", "OTEL_BSP_SCHEDULE_DELAY": "100"},
			settings{protocol: ProtocolGRPC, endpoint: "collector:4317", insecure: true, headers: map[string]string{"a": "1", "b": "2"},
				timeout: 1500 * time.Millisecond, gzip: true, service: "from-resource", resource: map[string]string{"deployment.environment": "ci"},
				sampler: "traceidratio", ratio: 0.5, batch: batchSettings{delay: 100 * time.Millisecond}}, ""},
		{"service name", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SERVICE_NAME": "svc", "OTEL_RESOURCE_ATTRIBUTES": "service.name=other"},
			settings{protocol: ProtocolHTTP, endpoint: "http://x/v1/traces", service: "svc"}, ""},
		{"http/json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, settings{}, `OTLP protocol "http/json" is not supported`},
		{"no scheme for http", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, settings{}, "is not an http:// or https:// URL"},
		{"bad timeout", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "10s"}, settings{}, "not a number of milliseconds"},
		{"bad header", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, settings{}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"zipkin exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "zipkin"}, settings{}, "only otlp"},
		{"missing certificate", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://x", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, settings{}, "OTLP certificate"},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "TRUE"}, settings{}, errDisabled.Error()},
	} {
		got, err := readSettings(func(k string) string { return tt.env[k] })
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if tt.want.headers == nil {
			tt.want.headers = map[string]string{}
		}
		if tt.want.resource == nil {
			tt.want.resource = map[string]string{}
		}
		if tt.want.sampler == "" {
			tt.want.sampler = "parentbased_always_on"
		}
		if got.protocol != tt.want.protocol || got.endpoint != tt.want.endpoint || got.insecure != tt.want.insecure || got.timeout != tt.want.timeout ||
			got.gzip != tt.want.gzip || got.service != tt.want.service || got.sampler != tt.want.sampler || got.ratio != tt.want.ratio ||
			got.batch != tt.want.batch || !maps.Equal(got.headers, tt.want.headers) || !maps.Equal(got.resource, tt.want.resource) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestNewWarnsAndStaysOff(t *testing.T) {
	t.Parallel()
	var warned []string
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
	tr := New(t.Context(), Config{Getenv: func(k string) string { return vars[k] },
		Warn: func(s string) { warned = append(warned, s) }})
	if tr != nil || len(warned) != 1 || !strings.HasPrefix(warned[0], "tracing is off: ") {
		t.Errorf("tracing %v, warnings %q", tr, warned)
	}
}
