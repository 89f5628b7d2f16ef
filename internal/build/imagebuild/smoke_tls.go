package imagebuild

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/varnishgw/terraform-provider-varnishgw/internal/gwruntime"
)

// smokeTLSPort is the HTTPS listener port of the smoke test's varnishd: its
// socket is port-443 in smokeTLSDir, as varnishd.TLSListener names it.
const (
	smokeTLSPort = 443
	smokeTLSDir  = "/tmp/smoke/tls"
	smokeTLSHost = "smoke.example.com"
)

// smokeTLSListener is varnishd's -a argument of the HTTPS listener, as
// varnishd.TLSListener(smokeTLSDir, 443).Arg() renders it (package build
// may not import package varnishd).
func smokeTLSListener() string {
	return fmt.Sprintf("port-%d=%s/port-%d.sock,PROXY,mode=0600", smokeTLSPort, smokeTLSDir, smokeTLSPort)
}

// prepareTLS writes a self-signed ECDSA P-256 certificate for smokeTLSHost
// (key and certificate in one PEM, mode 0600, owned by the image's user)
// into root's smokeTLSDir and returns the certificate for the client.
func prepareTLS(root string) (*x509.Certificate, error) {
	dir := filepath.Join(root, smokeTLSDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(dir, UID, GID); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: smokeTLSHost},
		DNSNames:     []string{smokeTLSHost},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("smoke certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	var pemFile bytes.Buffer
	_ = pem.Encode(&pemFile, &pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}) // a bytes.Buffer does not fail
	_ = pem.Encode(&pemFile, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	path := filepath.Join(dir, "smoke.pem")
	if err := os.WriteFile(path, pemFile.Bytes(), 0o600); err != nil {
		return nil, err
	}
	return cert, os.Chown(path, UID, GID)
}

// serveThroughHitch runs the image's hitch as the chaperone does for an
// HTTPS listener (backend varnishd's PROXY Unix socket, PROXY v2 with
// TLVs, ALPN h2 and http/1.1) in front of the running varnishd, and sends
// it an HTTP/2 request over TLS that ghost routes to the backend.
func serveThroughHitch(ctx context.Context, root string, cert *x509.Certificate, logf func(string, ...any)) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`frontend = "[127.0.0.1]:%d"
backend = "%s/port-%d.sock"
pem-file = "%s/smoke.pem"
workers = 1
write-proxy-v2 = on
proxy-tlv = on
alpn-protos = "h2, http/1.1"
daemon = off
`, ports[0], smokeTLSDir, smokeTLSPort, smokeTLSDir)
	confPath := filepath.Join(root, smokeTLSDir, "hitch.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var log bytes.Buffer
	cmd := chrootCmd(ctx, root, nil, gwruntime.DefaultChaperoneFlags().HitchBin, "--config="+smokeTLSDir+"/hitch.conf")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }() // killed: its status is an error

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: smokeTLSHost, RootCAs: roots},
		ForceAttemptHTTP2: true,
	}}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/smoke", ports[0])
	var last error
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("hitch in the gateway image did not serve %s through varnishd's socket %s (%v); its output:\n%s",
				url, smokeTLSListener(), last, lastLines(log.String(), 30))
		case <-time.After(300 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Host = smokeTLSHost
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && resp.ProtoMajor == 2 && resp.Header.Get("X-Route") == "smoke" &&
			strings.HasPrefix(string(body), "smoke-backend\n") {
			logf("hitch terminated TLS (%s) and handed an HTTP/2 request to varnishd's PROXY socket, routed by ghost, as uid %d",
				tls.VersionName(resp.TLS.Version), UID)
			return nil
		}
		last = fmt.Errorf("%s %s, X-Route %q, body %q", resp.Proto, resp.Status, resp.Header.Get("X-Route"), firstLine(string(body)))
	}
}
