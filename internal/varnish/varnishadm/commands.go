package varnishadm

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// VCL is one row of vcl.list.
type VCL struct {
	Name        string `json:"name"`
	Status      string `json:"status"`      // "active", "available", "discarded"
	State       string `json:"state"`       // "auto", "cold", "warm"
	Temperature string `json:"temperature"` // "init", "cold", "warm", "busy", "cooling"
	Busy        int    `json:"busy"`
	Label       string `json:"label,omitempty"`
}

// Active reports whether this VCL is the one in use.
func (v VCL) Active() bool { return v.Status == "active" }

// Backend is one row of backend.list.
type Backend struct {
	Name        string
	Type        string  `json:"type"`
	AdminHealth string  `json:"admin_health"`
	Probe       []any   `json:"probe_message"`
	LastChange  float64 `json:"last_change"`
}

// Healthy reports the backend's health as backend.list shows it.
func (b Backend) Healthy() bool {
	switch b.AdminHealth {
	case "healthy":
		return true
	case "sick", "deleted":
		return false
	}
	if len(b.Probe) == 3 {
		s, _ := b.Probe[2].(string)
		return s == "healthy"
	}
	return false
}

// Param is one parameter of param.show.
type Param struct {
	Name    string          `json:"name"`
	Value   json.RawMessage `json:"value"`
	Units   string          `json:"units"`
	Default string          `json:"default"`
}

// String returns the value as text (numbers unquoted, strings unquoted).
func (p Param) String() string {
	var s string
	if json.Unmarshal(p.Value, &s) == nil {
		return s
	}
	return string(p.Value)
}

// Ping checks that the manager answers.
func (c *Conn) Ping(ctx context.Context) error {
	_, err := c.Do(ctx, "ping")
	return err
}

// Status returns the state of the cache child: "running", "stopped", ...
func (c *Conn) Status(ctx context.Context) (string, error) {
	var s string
	err := c.doJSON(ctx, &s, "status", "-j")
	return s, err
}

// Start starts the cache child.
func (c *Conn) Start(ctx context.Context) error {
	_, err := c.Do(ctx, "start")
	return err
}

// Stop stops the cache child. varnishd's manager stays up.
func (c *Conn) Stop(ctx context.Context) error {
	_, err := c.Do(ctx, "stop")
	return err
}

// VCLInline compiles and loads VCL source under name. A VCL that does not
// compile is an *Error with status 106 (StatusParam) whose Body holds the
// compiler's message.
func (c *Conn) VCLInline(ctx context.Context, name, source string) error {
	_, err := c.Do(ctx, "vcl.inline", name, source)
	return err
}

// VCLLoad compiles and loads the VCL file at path under name.
func (c *Conn) VCLLoad(ctx context.Context, name, path string) error {
	_, err := c.Do(ctx, "vcl.load", name, path)
	return err
}

// VCLUse makes the named VCL the active one.
func (c *Conn) VCLUse(ctx context.Context, name string) error {
	_, err := c.Do(ctx, "vcl.use", name)
	return err
}

// VCLDiscard unloads the named VCL.
func (c *Conn) VCLDiscard(ctx context.Context, name string) error {
	_, err := c.Do(ctx, "vcl.discard", name)
	return err
}

// VCLList lists the loaded VCLs.
func (c *Conn) VCLList(ctx context.Context) ([]VCL, error) {
	var vcls []VCL
	err := c.doJSON(ctx, &vcls, "vcl.list", "-j")
	return vcls, err
}

// ParamShow returns one parameter.
func (c *Conn) ParamShow(ctx context.Context, name string) (Param, error) {
	var params []Param
	if err := c.doJSON(ctx, &params, "param.show", "-j", name); err != nil {
		return Param{}, err
	}
	if len(params) != 1 {
		return Param{}, fmt.Errorf("varnishadm: param.show %s: %d parameters in the answer", name, len(params))
	}
	return params[0], nil
}

// ParamSet sets a parameter.
func (c *Conn) ParamSet(ctx context.Context, name, value string) error {
	_, err := c.Do(ctx, "param.set", name, value)
	return err
}

// BackendList lists the backends of all VCLs, sorted by name.
func (c *Conn) BackendList(ctx context.Context) ([]Backend, error) {
	var byName []map[string]Backend
	if err := c.doJSON(ctx, &byName, "backend.list", "-j"); err != nil {
		return nil, err
	}
	var list []Backend
	for _, m := range byName {
		for name, b := range m {
			b.Name = name
			list = append(list, b)
		}
	}
	slices.SortFunc(list, func(a, b Backend) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// doJSON runs a command with -j and decodes the data elements of the answer
// (everything after the version, the command and the time) into v: a slice
// receives all of them, anything else the first.
func (c *Conn) doJSON(ctx context.Context, v any, args ...string) error {
	body, err := c.Do(ctx, args...)
	if err != nil {
		return err
	}
	var elems []json.RawMessage
	if err := json.Unmarshal([]byte(body), &elems); err != nil {
		return fmt.Errorf("varnishadm: %s: decode JSON answer: %w", args[0], err)
	}
	if len(elems) < 3 {
		return fmt.Errorf("varnishadm: %s: JSON answer has %d elements, want at least 3", args[0], len(elems))
	}
	data := elems[3:]
	var target []byte
	if reflect.TypeOf(v).Elem().Kind() == reflect.Slice {
		target, _ = json.Marshal(data)
	} else {
		if len(data) == 0 {
			return fmt.Errorf("varnishadm: %s: JSON answer has no data", args[0])
		}
		target = data[0]
	}
	if err := json.Unmarshal(target, v); err != nil {
		return fmt.Errorf("varnishadm: %s: decode JSON answer: %w", args[0], err)
	}
	return nil
}
