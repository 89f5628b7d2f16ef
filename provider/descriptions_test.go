package provider

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// maxSentences bounds a schema description: what the attribute is and
// does, its default and its constraint. How it works (RBAC, status
// mechanics) belongs in the guides.
const maxSentences = 3

// sentenceEnd matches the end of a sentence: a full stop, question or
// exclamation mark before a space or the end, not after "e.g" or "i.e".
var sentenceEnd = regexp.MustCompile(`[.!?](\s|$)`)

// sentences counts the sentences of a description.
func sentences(s string) int {
	s = strings.NewReplacer("e.g. ", "eg ", "i.e. ", "ie ", "etc. ", "etc ").Replace(strings.TrimSpace(s))
	n := len(sentenceEnd.FindAllStringIndex(s, -1))
	if s != "" && !sentenceEnd.MatchString(s[len(s)-1:]) && !strings.HasSuffix(s, ".") {
		n++ // a last sentence without a full stop
	}
	return n
}

func TestSentences(t *testing.T) {
	for in, want := range map[string]int{
		"":                          0,
		"One.":                      1,
		"One. Two.":                 2,
		"One, e.g. this. Two":       2,
		"Port 8080.5 is not. Two.":  2,
		"A `a.b` path. Two? Three!": 3,
	} {
		if got := sentences(in); got != want {
			t.Errorf("sentences(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSchemaDescriptionsAreShort: every description of every resource, data
// source, action and list resource, and of every attribute and block in
// them, is at most maxSentences sentences.
func TestSchemaDescriptionsAreShort(t *testing.T) {
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var long []string
	check := func(path, d string) {
		if n := sentences(d); n > maxSentences {
			long = append(long, fmt.Sprintf("%s (%d sentences)", path, n))
			if testing.Verbose() {
				t.Logf("%s:\n%s\n", path, d)
			}
		}
	}
	var walkBlock func(path string, b *tfprotov6.SchemaBlock)
	var walkObject func(path string, o *tfprotov6.SchemaObject)
	walkObject = func(path string, o *tfprotov6.SchemaObject) {
		for _, a := range o.Attributes {
			check(path+"."+a.Name, a.Description)
			if a.NestedType != nil {
				walkObject(path+"."+a.Name, a.NestedType)
			}
		}
	}
	walkBlock = func(path string, b *tfprotov6.SchemaBlock) {
		if b == nil {
			return
		}
		check(path, b.Description)
		for _, a := range b.Attributes {
			check(path+"."+a.Name, a.Description)
			if a.NestedType != nil {
				walkObject(path+"."+a.Name, a.NestedType)
			}
		}
		for _, nb := range b.BlockTypes {
			walkBlock(path+"."+nb.TypeName, nb.Block)
		}
	}
	for kind, schemas := range map[string]map[string]*tfprotov6.Schema{
		"provider":    {"varnishgw": resp.Provider},
		"resource":    resp.ResourceSchemas,
		"data source": resp.DataSourceSchemas,
		"list":        resp.ListResourceSchemas,
	} {
		for name, s := range schemas {
			if s != nil {
				walkBlock(kind+" "+name, s.Block)
			}
		}
	}
	for name, a := range resp.ActionSchemas {
		if a != nil && a.Schema != nil {
			walkBlock("action "+name, a.Schema.Block)
		}
	}
	sort.Strings(long)
	for _, l := range long {
		t.Errorf("%s: keep a schema description to %d sentences; move how it works to the guide", l, maxSentences)
	}
}
