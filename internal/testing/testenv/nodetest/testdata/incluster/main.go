// Command incluster asks the API server who it is, as a pod's program does:
// through the kubernetes Service (KUBERNETES_SERVICE_HOST and _PORT), with
// the pod's ServiceAccount token, verifying the server with the pod's
// ca.crt (kube-root-ca.crt). It prints the SelfSubjectReview's user name.
// The node test builds it statically into its image.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
}

func run() error {
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %sca.crt", sa)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, body)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return err
	}
	fmt.Println(review.Status.UserInfo.Username)
	return nil
}
