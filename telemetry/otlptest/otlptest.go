// Package otlptest is a local OpenTelemetry trace receiver for tests: it
// speaks OTLP/HTTP (POST /v1/traces, protobuf, optionally gzip) and
// OTLP/gRPC (the TraceService), decodes every export request with the
// official OTLP protobuf types and keeps the spans, the raw request bytes
// and the request headers.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Receiver collects what exporters send it. It is safe for concurrent use.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	requests int
	raw      [][]byte
	headers  []map[string]string
	spans    []*tracepb.Span
	resource []*commonpb.KeyValue
}

// NewHTTP starts an OTLP/HTTP receiver, stopped when t ends; the URL is
// the value for OTEL_EXPORTER_OTLP_ENDPOINT.
func NewHTTP(t testing.TB) (r *Receiver, url string) {
	t.Helper()
	r = &Receiver{}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// NewGRPC starts an OTLP/gRPC receiver on a local port, stopped when t
// ends; addr is host:port.
func NewGRPC(t testing.TB) (r *Receiver, addr string) {
	t.Helper()
	r = &Receiver{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r, lis.Addr().String()
}

func (r *Receiver) add(raw []byte, headers map[string]string, req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.raw = append(r.raw, raw)
	r.headers = append(r.headers, headers)
	for _, rs := range req.GetResourceSpans() {
		r.resource = rs.GetResource().GetAttributes()
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
}

// ServeHTTP is the OTLP/HTTP endpoint: anything but a protobuf POST to
// /v1/traces is refused.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected request "+req.Method+" "+req.URL.Path, http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	headers := map[string]string{}
	for k := range req.Header {
		headers[strings.ToLower(k)] = req.Header.Get(k)
	}
	r.add(raw, headers, &msg)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Export is the OTLP/gRPC TraceService.
func (r *Receiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, v := range md {
		headers[k] = strings.Join(v, ",")
	}
	r.add(raw, headers, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Snapshot returns the number of export requests so far, their spans and
// their raw bytes concatenated (to search for leaked strings).
func (r *Receiver) Snapshot() (requests int, spans []*tracepb.Span, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]*tracepb.Span(nil), r.spans...), bytes.Join(r.raw, nil)
}

// Headers returns each request's headers (gRPC metadata), lower-case keys.
func (r *Receiver) Headers() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]string(nil), r.headers...)
}

// Resource returns the resource attributes of the last request.
func (r *Receiver) Resource() []*commonpb.KeyValue {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resource
}

// Named returns the spans called name, by trace id (hex).
func (r *Receiver) Named(name string) map[string]*tracepb.Span {
	_, spans, _ := r.Snapshot()
	out := map[string]*tracepb.Span{}
	for _, s := range spans {
		if s.GetName() == name {
			out[hex.EncodeToString(s.GetTraceId())] = s
		}
	}
	return out
}

// Attr is a span attribute's value (string, int64, float64 or bool), nil
// when absent.
func Attr(s *tracepb.Span, key string) any {
	return Value(s.GetAttributes(), key)
}

// Value is the value of key among kvs (string, int64, float64 or bool,
// else its text form), nil when absent.
func Value(kvs []*commonpb.KeyValue, key string) any {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return Plain(kv.GetValue())
		}
	}
	return nil
}

// Plain converts an OTLP value to a Go value (string, int64, float64,
// bool, else its text form).
func Plain(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	}
	return v.String()
}
