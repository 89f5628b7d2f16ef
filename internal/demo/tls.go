package demo

import (
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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Certificate is the demo's TLS certificate: a certificate authority made
// for one run, whose certificate is in CAFile (curl --cacert) and Pool, and
// a server certificate it issued, stored as a Secret of type
// kubernetes.io/tls that the demo's HTTPS listener references.
type Certificate struct {
	CAFile string
	Pool   *x509.CertPool
}

// CreateCertificate makes a CA (written to dir/ca.pem) and a certificate
// for hosts valid for a day, and creates or replaces the Secret ns/name
// with it.
func CreateCertificate(ctx context.Context, kube kubernetes.Interface, ns, name, dir string, hosts ...string) (*Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make the demo's CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "varnishgw demo CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make the demo's CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make the demo's server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano() + 1),
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make the demo's server certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return nil, fmt.Errorf("write the demo's CA certificate: %w", err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		},
	}
	secrets := kube.CoreV1().Secrets(ns)
	if _, err = secrets.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("create the Secret %s/%s: %w", ns, name, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &Certificate{CAFile: caFile, Pool: pool}, nil
}

// CurlTLS is the curl command line of r over HTTPS against the gateway at
// addr: the request's host is the TLS server name (SNI), resolved to
// addr's IP, and the certificate is checked against the CA in caFile.
func (r Request) CurlTLS(addr, caFile string) string {
	ip, port, _ := net.SplitHostPort(addr)
	var b strings.Builder
	b.WriteString("curl -si")
	if r.Method != "" && r.Method != http.MethodGet {
		b.WriteString(" -X " + r.Method)
	}
	fmt.Fprintf(&b, " --cacert %s --resolve %s:%s:%s", caFile, r.Host, port, ip)
	for k, v := range r.Headers {
		fmt.Fprintf(&b, " -H '%s: %s'", k, v)
	}
	fmt.Fprintf(&b, " https://%s:%s%s", r.Host, port, r.Path)
	return b.String()
}

// DoTLS sends r over HTTPS to the gateway at addr, as CurlTLS does: SNI
// and Host are r.Host, the certificate must be issued by a CA in roots.
// The answer's Proto says whether HTTP/2 was negotiated.
func (r Request) DoTLS(addr string, roots *x509.CertPool) (Answer, string, error) {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	_, port, _ := net.SplitHostPort(addr)
	req, err := http.NewRequest(method, "https://"+net.JoinHostPort(r.Host, port)+r.Path, nil)
	if err != nil {
		return Answer{}, "", err
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			ForceAttemptHTTP2: true,
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return Answer{}, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return Answer{Status: resp.StatusCode, Backend: resp.Header.Get("X-Backend"), Location: resp.Header.Get("Location"), Body: string(body)}, resp.Proto, nil
}
