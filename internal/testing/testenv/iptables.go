package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ourChainPrefixes name the iptables chains of a Kubernetes node: the
// kubelet's and kube-proxy's (KUBE-) and CNI plugins' (CNI-).
var ourChainPrefixes = []string{"KUBE-", "CNI-"}

// iptables is one iptables flavor: IPv4 or IPv6, nf_tables or legacy.
type iptables struct{ save, restore string }

// iptablesFlavors returns the flavors installed on this machine. The node's
// components use the default `iptables` (nf_tables on Debian 12); the
// legacy flavors are looked at too, in case.
func iptablesFlavors() []iptables {
	var out []iptables
	for _, f := range []iptables{
		{"iptables-save", "iptables-restore"},
		{"ip6tables-save", "ip6tables-restore"},
		{"iptables-legacy-save", "iptables-legacy-restore"},
		{"ip6tables-legacy-save", "ip6tables-legacy-restore"},
	} {
		if _, err := exec.LookPath(f.save); err == nil {
			out = append(out, f)
		}
	}
	return out
}

func ours(chain string) bool {
	return slices.ContainsFunc(ourChainPrefixes, func(p string) bool { return strings.HasPrefix(chain, p) })
}

// jumpTarget matches the target of a rule that jumps or goes to a chain.
var jumpTarget = regexp.MustCompile(`(?:^| )-[jg] (\S+)`)

// iptablesTable is one table of iptables-save output.
type iptablesTable struct {
	name   string
	chains []string // declared chains (":NAME POLICY [...]")
	rules  []string // "-A CHAIN ..." lines
}

func (ipt iptables) dump() ([]iptablesTable, error) {
	out, err := exec.Command(ipt.save).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("%s: %w", ipt.save, err)
	}
	var tables []iptablesTable
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			tables = append(tables, iptablesTable{name: line[1:]})
		case len(tables) == 0:
		case strings.HasPrefix(line, ":"):
			t := &tables[len(tables)-1]
			t.chains = append(t.chains, strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-A "):
			t := &tables[len(tables)-1]
			t.rules = append(t.rules, line)
		}
	}
	return tables, sc.Err()
}

// ourChains lists the node's chains in every table, as "table/chain".
func (ipt iptables) ourChains() ([]string, error) {
	tables, err := ipt.dump()
	if err != nil {
		return nil, err
	}
	var found []string
	for _, t := range tables {
		for _, c := range t.chains {
			if ours(c) {
				found = append(found, t.name+"/"+c)
			}
		}
	}
	return found, nil
}

// removeOurChains deletes the rules of other chains that jump to the
// node's chains, then flushes and deletes the node's chains, in one
// iptables-restore --noflush per table.
func (ipt iptables) removeOurChains() error {
	tables, err := ipt.dump()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tables {
		var chains []string
		for _, c := range t.chains {
			if ours(c) {
				chains = append(chains, c)
			}
		}
		if len(chains) == 0 {
			continue
		}
		var in strings.Builder
		fmt.Fprintf(&in, "*%s\n", t.name)
		for _, r := range t.rules {
			chain := strings.Fields(r)[1]
			if ours(chain) {
				continue
			}
			if m := jumpTarget.FindStringSubmatch(r); m != nil && ours(m[1]) {
				fmt.Fprintf(&in, "-D%s\n", strings.TrimPrefix(r, "-A"))
			}
		}
		for _, c := range chains {
			fmt.Fprintf(&in, "-F %s\n", c)
		}
		for _, c := range chains {
			fmt.Fprintf(&in, "-X %s\n", c)
		}
		in.WriteString("COMMIT\n")
		cmd := exec.Command(ipt.restore, "--noflush")
		cmd.Stdin = strings.NewReader(in.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s (table %s): %v: %s; input:\n%s", ipt.restore, t.name, err, out, in.String()))
		}
	}
	return errors.Join(errs...)
}

// cleanupIptables removes the node's iptables chains: first with
// `kube-proxy --cleanup` (kube-proxy's own chains and rules, both
// families), then every KUBE- and CNI- chain left (the kubelet's).
func cleanupIptables(kubeProxy string) error {
	if kubeProxy != "" {
		if _, err := os.Stat(kubeProxy); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			// Its errors (modes this machine lacks) do not matter: what
			// is left is removed below and checked.
			_ = exec.CommandContext(ctx, kubeProxy, "--cleanup", "--v=0").Run()
			cancel()
		}
	}
	var errs []error
	for _, ipt := range iptablesFlavors() {
		if err := ipt.removeOurChains(); err != nil {
			errs = append(errs, err)
			continue
		}
		if left, err := ipt.ourChains(); err != nil || len(left) > 0 {
			errs = append(errs, fmt.Errorf("%s: chains left: %v %v", ipt.save, left, err))
		}
	}
	return errors.Join(errs...)
}

// nftTables lists the nf_tables tables ("ip filter", "ip6 nat", ...).
// iptables-nft creates the tables it is asked about: the node's
// components leave empty filter, nat and mangle tables behind, which
// removeNewNftTables deletes.
func nftTables() ([]string, error) {
	out, err := exec.Command("nft", "-j", "list", "tables").Output()
	if err != nil {
		return nil, fmt.Errorf("nft list tables: %w", err)
	}
	var list struct {
		Nftables []struct {
			Table *struct {
				Family string `json:"family"`
				Name   string `json:"name"`
			} `json:"table"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("nft list tables: %w", err)
	}
	var tables []string
	for _, o := range list.Nftables {
		if o.Table != nil {
			tables = append(tables, o.Table.Family+" "+o.Table.Name)
		}
	}
	return tables, nil
}

// removeNewNftTables deletes the nf_tables tables that were not there
// before the node, when they hold no rule (else it says which do).
func removeNewNftTables(before []string) error {
	now, err := nftTables()
	if err != nil {
		return err
	}
	var errs []error
	for _, table := range now {
		if slices.Contains(before, table) {
			continue
		}
		args := append([]string{"-j", "list", "table"}, strings.Fields(table)...)
		out, err := exec.Command("nft", args...).Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("nft list table %s: %w", table, err))
			continue
		}
		if rules := strings.Count(string(out), `{"rule":`); rules > 0 {
			errs = append(errs, fmt.Errorf("nf_tables table %s, made while the node ran, still has %d rules", table, rules))
			continue
		}
		if out, err := exec.Command("nft", append([]string{"delete", "table"}, strings.Fields(table)...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("nft delete table %s: %v: %s", table, err, out))
		}
	}
	return errors.Join(errs...)
}
