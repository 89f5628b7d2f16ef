package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// The API server writes an audit log of every request made by a
// ServiceAccount (metadata only) to auditLog in the control plane's
// directory, so that tests can see exactly which rights an identity used
// (AuditEvents): that its Role grants nothing it does not need.
const (
	auditLog = "audit.log"
	// auditPolicy records ServiceAccounts' requests only; the admin's and
	// the control plane's own would make the log large and say nothing.
	auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`
)

// auditArgs are kube-apiserver's audit flags; the policy file is written
// to dir.
func auditArgs(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("write the audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + filepath.Join(dir, auditLog),
		"--audit-log-format=json",
		// Blocking: an event is in the file when its request has returned.
		"--audit-log-mode=blocking",
	}, nil
}

// AuditEvent is one request in the audit log.
type AuditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// AuditEvents returns the requests ServiceAccount namespace/name made, one
// event per request, in order.
func (cp *ControlPlane) AuditEvents(namespace, name string) ([]AuditEvent, error) {
	f, err := os.Open(filepath.Join(cp.Dir, auditLog))
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	defer f.Close()
	user := "system:serviceaccount:" + namespace + ":" + name
	seen := map[string]bool{}
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		if e.User.Username != user || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	return out, nil
}
