// Command actartifacts serves nektos/act's own v4 artifact server routes
// (the code `act --artifact-server-path` runs) on a directory, so checks can
// read artifacts an act run stored there after act has exited. It writes
// its address to -addr-file and a runtime token for run -run to -token-file
// (act's unsigned JWT with the Actions.Results:<run>:<run> scope).
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/julienschmidt/httprouter"
	"github.com/nektos/act/pkg/artifacts"
	"github.com/nektos/act/pkg/common"
)

type osFS struct{}

func (osFS) Open(name string) (fs.File, error) { return os.Open(name) }

func (osFS) OpenWritable(name string) (artifacts.WritableFile, error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
}

func (osFS) OpenAppendable(name string) (artifacts.WritableFile, error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

func main() {
	dir := flag.String("dir", "", "artifact directory (act's --artifact-server-path)")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the bound host:port here")
	tokenFile := flag.String("token-file", "", "write a runtime token here")
	run := flag.Int64("run", 1, "workflow run id of the token")
	flag.Parse()
	abs, err := filepath.Abs(*dir)
	if err != nil {
		log.Fatal(err)
	}
	router := httprouter.New()
	artifacts.RoutesV4(router, abs, osFS{}, osFS{})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	tok, err := common.CreateAuthorizationToken(1, *run, *run)
	if err != nil {
		log.Fatal(err)
	}
	for f, v := range map[string]string{*addrFile: ln.Addr().String(), *tokenFile: tok} {
		if f != "" {
			if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "act artifact server for %s on http://%s\n", abs, ln.Addr())
	log.Fatal(http.Serve(ln, router))
}
