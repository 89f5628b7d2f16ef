package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// authority is the control plane's certificate authority: it signs the
// API server's serving certificate and, with a node, the client and serving
// certificates of the node's components.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

func newAuthority() (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "varnishgw-testenv-ca"}, key)
	if err != nil {
		return nil, fmt.Errorf("generate CA certificate: %w", err)
	}
	return &authority{cert: ca, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: ca.Raw})}, nil
}

// certSpec describes a certificate to issue.
type certSpec struct {
	commonName    string
	organizations []string
	ips           []net.IP
	dnsNames      []string
	server        bool // serving certificate (else client)
}

// issue returns a certificate signed by the authority and its key, PEM
// encoded, valid for a day.
func (a *authority) issue(s certSpec) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", s.commonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if s.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.commonName, Organization: s.organizations},
		IPAddresses:  s.ips,
		DNSNames:     s.dnsNames,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %s: %w", s.commonName, err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key for %s: %w", s.commonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: der}), keyPEM, nil
}
