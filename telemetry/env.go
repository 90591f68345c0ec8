package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Protocols of the OTLP trace exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME (and a
// service.name in OTEL_RESOURCE_ATTRIBUTES) is not set.
const DefaultServiceName = "prodigy-action"

// settings is the exporter configuration the OTEL_* environment asks for.
type settings struct {
	protocol string
	// endpoint is the full URL of the traces endpoint (http/protobuf), or
	// a URL or host:port (grpc).
	endpoint string
	insecure bool
	headers  map[string]string
	timeout  time.Duration
	gzip     bool
	tls      *tls.Config
	service  string
	resource map[string]string
	sampler  string
	ratio    float64
	batch    batchSettings
}

// batchSettings are the batch span processor's OTEL_BSP_* values (0 =
// the SDK default).
type batchSettings struct {
	delay, exportTimeout time.Duration
	queue, batch         int
}

// errDisabled means the environment asks for no tracing.
var errDisabled = errors.New("tracing is not enabled")

// envLookup reads the traces-specific variable, then the general one:
// OTEL_EXPORTER_OTLP_TRACES_<name>, OTEL_EXPORTER_OTLP_<name>.
type envLookup func(string) string

func (get envLookup) otlp(name string) string {
	if v := strings.TrimSpace(get("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
		return v
	}
	return strings.TrimSpace(get("OTEL_EXPORTER_OTLP_" + name))
}

// readSettings reads the OpenTelemetry environment (the variables of the
// OpenTelemetry specification's "Environment Variable Specification" and
// "OTLP Exporter Configuration" that apply to traces). It returns
// errDisabled when tracing is off: no endpoint set, OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none; any other error is a configuration the
// exporter cannot use.
func readSettings(getenv func(string) string) (settings, error) {
	get := envLookup(getenv)
	var s settings
	if strings.EqualFold(strings.TrimSpace(get("OTEL_SDK_DISABLED")), "true") {
		return s, errDisabled
	}
	if exp := strings.TrimSpace(get("OTEL_TRACES_EXPORTER")); exp != "" {
		otlp := false
		for _, e := range strings.Split(exp, ",") {
			otlp = otlp || strings.TrimSpace(e) == "otlp"
		}
		if !otlp {
			if exp != "none" {
				return s, fmt.Errorf("OTEL_TRACES_EXPORTER=%s is not supported (only otlp)", exp)
			}
			return s, errDisabled
		}
	}
	specific := strings.TrimSpace(get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	general := strings.TrimSpace(get("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if specific == "" && general == "" {
		return s, errDisabled
	}
	s.protocol = get.otlp("PROTOCOL")
	if s.protocol == "" {
		s.protocol = ProtocolHTTP
	}
	if s.protocol != ProtocolHTTP && s.protocol != ProtocolGRPC {
		return s, fmt.Errorf("OTLP protocol %q is not supported (use %s or %s)", s.protocol, ProtocolHTTP, ProtocolGRPC)
	}
	var err error
	if s.endpoint, err = endpointOf(s.protocol, specific, general); err != nil {
		return s, err
	}
	s.insecure = strings.EqualFold(get.otlp("INSECURE"), "true")
	s.headers = map[string]string{}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parseList(get(name), s.headers); err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
	}
	if v := get.otlp("TIMEOUT"); v != "" {
		if s.timeout, err = millis(v); err != nil {
			return s, fmt.Errorf("OTLP timeout: %w", err)
		}
	}
	switch c := get.otlp("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		s.gzip = true
	default:
		return s, fmt.Errorf("OTLP compression %q is not supported (gzip or none)", c)
	}
	if s.tls, err = tlsConfig(get.otlp("CERTIFICATE"), get.otlp("CLIENT_CERTIFICATE"), get.otlp("CLIENT_KEY")); err != nil {
		return s, err
	}
	s.resource = map[string]string{}
	if err := parseList(get("OTEL_RESOURCE_ATTRIBUTES"), s.resource); err != nil {
		return s, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	s.service = strings.TrimSpace(get("OTEL_SERVICE_NAME"))
	if s.service == "" {
		s.service = s.resource["service.name"]
	}
	if s.service == "" {
		s.service = DefaultServiceName
	}
	delete(s.resource, "service.name")
	if s.sampler, s.ratio, err = sampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return s, err
	}
	if s.batch, err = batch(get); err != nil {
		return s, err
	}
	return s, nil
}

// endpointOf is the traces endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as
// given, else OTEL_EXPORTER_OTLP_ENDPOINT, to which HTTP appends
// /v1/traces. An HTTP endpoint must be an http or https URL; a gRPC one is
// a URL or host:port.
func endpointOf(protocol, specific, general string) (string, error) {
	raw, name := specific, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if raw == "" {
		raw, name = general, "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	if protocol == ProtocolGRPC && !strings.Contains(raw, "://") {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%q is not an http:// or https:// URL", name, raw)
	}
	if protocol == ProtocolHTTP && specific == "" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// parseList adds the comma-separated key=value pairs of s (W3C Baggage
// format, values percent-encoded) to into.
func parseList(s string, into map[string]string) error {
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", strings.TrimSpace(k))
		}
		dec, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("the value of %s: %w", k, err)
		}
		into[k] = dec
	}
	return nil
}

// millis parses a duration in milliseconds.
func millis(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a number of milliseconds", v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// tlsConfig is the TLS configuration of the certificate files; nil when
// none is given (the system roots).
func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTLP certificate: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTLP certificate %s holds no PEM certificate", ca)
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("OTLP client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// sampler validates OTEL_TRACES_SAMPLER (default parentbased_always_on)
// and its ratio argument.
func sampler(name, arg string) (string, float64, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "parentbased_always_on"
	}
	switch name {
	case "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return name, 0, nil
	case "traceidratio", "parentbased_traceidratio":
		ratio := 1.0
		if arg = strings.TrimSpace(arg); arg != "" {
			r, err := strconv.ParseFloat(arg, 64)
			if err != nil || r < 0 || r > 1 {
				return "", 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q is not a ratio between 0 and 1", arg)
			}
			ratio = r
		}
		return name, ratio, nil
	}
	return "", 0, fmt.Errorf("OTEL_TRACES_SAMPLER=%s is not supported", name)
}

// batch reads the OTEL_BSP_* variables.
func batch(get envLookup) (batchSettings, error) {
	var b batchSettings
	var err error
	for _, d := range []struct {
		name string
		into *time.Duration
	}{{"OTEL_BSP_SCHEDULE_DELAY", &b.delay}, {"OTEL_BSP_EXPORT_TIMEOUT", &b.exportTimeout}} {
		if v := strings.TrimSpace(get(d.name)); v != "" {
			if *d.into, err = millis(v); err != nil {
				return b, fmt.Errorf("%s: %w", d.name, err)
			}
		}
	}
	for _, n := range []struct {
		name string
		into *int
	}{{"OTEL_BSP_MAX_QUEUE_SIZE", &b.queue}, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &b.batch}} {
		if v := strings.TrimSpace(get(n.name)); v != "" {
			if *n.into, err = strconv.Atoi(v); err != nil || *n.into <= 0 {
				return b, fmt.Errorf("%s=%q is not a positive number", n.name, v)
			}
		}
	}
	return b, nil
}

// HeaderValues are the values of the OTLP export headers
// (OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS): they
// often carry a collector's API key, so callers add them to their
// redactor. Malformed lists yield what could be parsed.
func HeaderValues(getenv func(string) string) []string {
	if getenv == nil {
		return nil
	}
	var vals []string
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		h := map[string]string{}
		_ = parseList(getenv(name), h)
		for _, v := range h {
			vals = append(vals, v)
		}
	}
	return vals
}
