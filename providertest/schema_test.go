package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaCases are schemas the default responder must satisfy, from the
// shapes OpenAI strict mode produces to keyword corner cases.
var schemaCases = []struct{ name, schema string }{
	{"strict object", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"ok":{"type":"boolean"},"score":{"type":"number"}},"required":["name","age","ok","score"],"additionalProperties":false}`},
	{"enum and const", `{"type":"object","properties":{"color":{"type":"string","enum":["red","green"]},"kind":{"const":"fixed"},"n":{"enum":[3,4]}},"required":["color","kind","n"]}`},
	{"string lengths", `{"type":"object","properties":{"long":{"type":"string","minLength":20},"short":{"type":"string","maxLength":3},"exact":{"type":"string","minLength":4,"maxLength":4},"empty":{"type":"string","maxLength":0}},"required":["long","short","exact","empty"]}`},
	{"number bounds", `{"type":"object","properties":{"a":{"type":"integer","minimum":10,"maximum":20},"b":{"type":"number","exclusiveMinimum":0},"c":{"type":"number","exclusiveMinimum":5,"exclusiveMaximum":6},"d":{"type":"integer","minimum":3,"multipleOf":5},"e":{"type":"integer","maximum":-10},"f":{"type":"integer","exclusiveMaximum":1,"exclusiveMinimum":-1},"g":{"type":"number","minimum":0.005,"multipleOf":0.01}},"required":["a","b","c","d","e","f","g"]}`},
	{"arrays", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":3,"maxItems":5,"uniqueItems":true},"none":{"type":"array","maxItems":0,"items":{"type":"integer"}},"nums":{"type":"array","items":{"type":"integer","minimum":1},"minItems":2,"uniqueItems":true},"picks":{"type":"array","items":{"enum":["x","y","z"]},"minItems":3,"uniqueItems":true}},"required":["tags","none","nums","picks"]}`},
	{"type arrays", `{"type":"object","properties":{"a":{"type":["null","string"]},"b":{"type":["integer","null"],"minimum":2},"c":{"type":"null"}},"required":["a","b","c"]}`},
	{"anyOf and oneOf", `{"type":"object","properties":{"x":{"anyOf":[{"type":"null"},{"type":"string","minLength":2}]},"y":{"oneOf":[{"type":"integer"},{"type":"string"}]},"z":{"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},{"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]}},"required":["x","y","z"]}`},
	{"allOf merge", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":7}},"required":["b"]},{"properties":{"a":{"minLength":9}}}]}`},
	{"defs ref", `{"$defs":{"item":{"type":"object","properties":{"id":{"type":"string","format":"uuid"}},"required":["id"],"additionalProperties":false}},"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"},"minItems":2}},"required":["items"]}`},
	{"definitions ref", `{"definitions":{"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"p":{"$ref":"#/definitions/pos"}},"required":["p"]}`},
	{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","children"],"additionalProperties":false}},"$ref":"#/$defs/node"}`},
	{"recursive root", `{"type":"object","properties":{"value":{"type":"integer"},"next":{"$ref":"#"}},"required":["value"]}`},
	{"formats", `{"type":"object","properties":{"dt":{"type":"string","format":"date-time"},"d":{"type":"string","format":"date"},"t":{"type":"string","format":"time"},"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},"h":{"type":"string","format":"hostname"},"v4":{"type":"string","format":"ipv4"},"v6":{"type":"string","format":"ipv6"},"dur":{"type":"string","format":"duration"}},"required":["dt","d","t","e","u","id","h","v4","v6","dur"]}`},
	{"defaults", `{"type":"object","properties":{"lang":{"type":"string","default":"en"},"n":{"type":"integer","default":42,"enum":[1,42]}},"required":["lang","n"]}`},
	{"patterns", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"},"word":{"type":"string","pattern":"^[a-z]+$","minLength":10},"sku":{"type":"string","pattern":"^(ab|cd)_[0-9]+x?$"}},"required":["code","word","sku"]}`},
	{"tuple", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`},
	{"properties count", `{"type":"object","additionalProperties":{"type":"integer"},"minProperties":3}`},
	{"max properties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"required":["c"],"maxProperties":1}`},
	{"inferred types", `{"properties":{"s":{"minLength":3},"n":{"minimum":4},"l":{"minItems":1}},"required":["s","n","l"]}`},
	{"draft 4", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":1,"exclusiveMinimum":true,"maximum":2}},"required":["n"]}`},
	{"nested strict", `{"type":"object","properties":{"people":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"email":{"type":["string","null"],"format":"email"},"tags":{"type":"array","items":{"type":"string","enum":["a","b"]}}},"required":["name","email","tags"],"additionalProperties":false}}},"required":["people"],"additionalProperties":false}`},
	{"dependent required", `{"type":"object","properties":{"card":{"type":"string"}},"patternProperties":{"^x-":{"type":"integer"}},"required":["card","x-extra"],"dependentRequired":{"card":["billing"]}}`},
	{"true schema", `true`},
	{"empty schema", `{}`},
	{"contains", `{"type":"array","contains":{"type":"integer","minimum":5}}`},
}

// compile compiles src with format assertions on, so format examples are
// checked too.
func compile(t *testing.T, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return sch
}

// validate checks a JSON text against sch as it would arrive on the wire.
func validate(t *testing.T, sch *jsonschema.Schema, text string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("instance %s: %v", text, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("instance %s is invalid:\n%v", text, err)
	}
}

func TestExampleForIsValid(t *testing.T) {
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			sch := compile(t, tc.schema)
			var schema any
			if err := json.Unmarshal([]byte(tc.schema), &schema); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(exampleFor(schema))
			if err != nil {
				t.Fatal(err)
			}
			validate(t, sch, string(b))
		})
	}
}

// TestExampleForUseNumber checks schemas decoded with UseNumber work too.
func TestExampleForUseNumber(t *testing.T) {
	src := schemaCases[3].schema // number bounds
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	var schema any
	if err := dec.Decode(&schema); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(exampleFor(schema))
	validate(t, compile(t, src), string(b))
}

func TestExampleForDeterministic(t *testing.T) {
	for _, tc := range schemaCases {
		var schema any
		_ = json.Unmarshal([]byte(tc.schema), &schema)
		a, _ := json.Marshal(exampleFor(schema))
		b, _ := json.Marshal(exampleFor(schema))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: %s then %s", tc.name, a, b)
		}
	}
}

func TestExampleForPicksNiceValues(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"type":"string"}`, `"example"`},
		{`{"type":"string","maxLength":3}`, `"exa"`},
		{`{"type":"string","minLength":10}`, `"exampleexa"`},
		{`{"type":["null","integer"]}`, `1`},
		{`{"enum":["b","a"]}`, `"b"`},
		{`{"type":"integer","minimum":10,"maximum":20}`, `10`},
		{`{"type":"string","format":"date"}`, `"2024-01-01"`},
		{`{"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"}`, `"AAA-0000"`},
	}
	for _, tt := range tests {
		var schema any
		if err := json.Unmarshal([]byte(tt.schema), &schema); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(exampleFor(schema))
		if string(got) != tt.want {
			t.Errorf("exampleFor(%s) = %s, want %s", tt.schema, got, tt.want)
		}
	}
}

// TestDefaultResponderSchemas runs every schema through the HTTP path, as
// a client requesting structured output would: as OpenAI's json_schema,
// and as the json_object with a "schema" that instructor's JSON_SCHEMA
// mode sends to vLLM.
func TestDefaultResponderSchemas(t *testing.T) {
	srv := httptest.NewServer(NewHandler())
	defer srv.Close()
	formats := map[string]string{
		"json_schema": `{"type":"json_schema","json_schema":{"name":"out","schema":%s}}`,
		"json_object": `{"type":"json_object","schema":%s}`,
	}
	for format, tmpl := range formats {
		for _, tc := range schemaCases {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"go"}],"response_format":%s}`, fmt.Sprintf(tmpl, tc.schema))
				resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var env struct {
					Choices []struct {
						Message struct{ Content string }
					}
				}
				if err := json.Unmarshal(raw, &env); err != nil || len(env.Choices) != 1 {
					t.Fatalf("status %d body %s", resp.StatusCode, raw)
				}
				validate(t, compile(t, tc.schema), env.Choices[0].Message.Content)
			})
		}
	}
}
