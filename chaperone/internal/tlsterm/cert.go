package tlsterm

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Checked is a certificate that passed Check: the PEM hitch gets and the
// leaf's validity.
type Checked struct {
	// PEM is the private key followed by the certificate chain, the
	// layout hitch reads.
	PEM []byte
	// NotAfter and NotBefore are the leaf certificate's validity.
	NotBefore, NotAfter time.Time
	// Names are the leaf's DNS names (hitch selects by them).
	Names []string
}

// Hash names the PEM's content (its file name in the TLS directory).
func (c *Checked) Hash() string {
	sum := sha256.Sum256(c.PEM)
	return hex.EncodeToString(sum[:12])
}

// Check validates a kubernetes.io/tls Secret's tls.crt and tls.key at
// time now: both parse as PEM, the key belongs to the first certificate
// (crypto/tls.X509KeyPair), and now is within the leaf's validity. The
// error says what is wrong and what to do.
func Check(certPEM, keyPEM []byte, now time.Time) (*Checked, error) {
	if len(bytes.TrimSpace(certPEM)) == 0 {
		return nil, errors.New("tls.crt is empty: put the PEM certificate chain (leaf first) in the Secret's tls.crt")
	}
	if len(bytes.TrimSpace(keyPEM)) == 0 {
		return nil, errors.New("tls.key is empty: put the PEM private key of the certificate in the Secret's tls.key")
	}
	if b, _ := pem.Decode(certPEM); b == nil {
		return nil, errors.New("tls.crt is not PEM: want -----BEGIN CERTIFICATE----- blocks, leaf first")
	}
	if b, _ := pem.Decode(keyPEM); b == nil {
		return nil, errors.New("tls.key is not PEM: want a -----BEGIN ... PRIVATE KEY----- block")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.crt and tls.key do not make a key pair (%v): tls.key must be the private key of the first certificate in tls.crt", err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls.crt: parse the first certificate: %w", err)
		}
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("the certificate (subject %q) expired at %s: renew it and update the Secret", leaf.Subject.String(), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("the certificate (subject %q) is not valid before %s: check the issuer's clock or wait", leaf.Subject.String(), leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	// hitch gets exactly the blocks it needs: the key, then the chain.
	var out bytes.Buffer
	if err := appendBlocks(&out, keyPEM, func(t string) bool { return t == "PRIVATE KEY" || t == "RSA PRIVATE KEY" || t == "EC PRIVATE KEY" }); err != nil {
		return nil, fmt.Errorf("tls.key: %w", err)
	}
	if err := appendBlocks(&out, certPEM, func(t string) bool { return t == "CERTIFICATE" }); err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	return &Checked{PEM: out.Bytes(), NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter, Names: leaf.DNSNames}, nil
}

// appendBlocks writes the PEM blocks of data whose type keep accepts.
func appendBlocks(out *bytes.Buffer, data []byte, keep func(string) bool) error {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if !keep(b.Type) {
			continue
		}
		if err := pem.Encode(out, &pem.Block{Type: b.Type, Bytes: b.Bytes}); err != nil {
			return err
		}
	}
}
