package kube

import (
	"context"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/sirupsen/logrus"
)

// schemaRecheck is how long the reader trusts a schema that lacks a field, or
// a document it could not read, before it reads the document again: the CRDs
// may have been upgraded since. A schema with every field is kept until the
// version itself is forgotten.
const schemaRecheck = time.Minute

// withSchema fills in the schema of a route just read.
func (c *Cluster) withSchema(ctx context.Context, r routes.Route, err error) (routes.Route, error) {
	if err != nil {
		return r, err
	}
	r.Schema = c.schemaOf(ctx, r.Kind, r.Version)
	return r, nil
}

// schemaOf is what the installed CRD of kind defines in version, from the
// apiserver's OpenAPI v3 document of the group version: read once per
// version and process (every authenticated user may read it, through the
// system:discovery role), again after schemaRecheck when it lacked a field or
// could not be read. A document that cannot be read is logged, and the kind
// is taken to have every field: the plugin writes as it did before it read
// schemas, and the apiserver's answer names a field it refuses.
func (c *Cluster) schemaOf(ctx context.Context, kind routes.Kind, version string) routes.Schema {
	if d, ok := c.cachedSchema(version); ok {
		return d.kinds[kind]
	}
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	if d, ok := c.cachedSchema(version); ok {
		return d.kinds[kind] // read by a call that held the lock first
	}
	log := c.log.WithFields(logrus.Fields{"group": routes.Group, "version": version})
	path, err := objectPath("/openapi/v3/apis", routes.Group, version)
	var raw []byte
	if err == nil {
		raw, err = body(c.client.Get().AbsPath(path...).Do(ctx))
	}
	var kinds map[routes.Kind]routes.Schema
	if err == nil {
		kinds, err = routes.SchemasFromOpenAPI(raw, version)
	}
	c.mu.Lock()
	old, known := c.schemas[version]
	c.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			entry := log.WithError(err)
			if known && old.failed {
				entry.Debug("cannot read the Gateway API schema again")
			} else {
				entry.Warn("cannot read the Gateway API schema from the apiserver's OpenAPI document; writing routes as for CRDs that have every field the plugin writes")
			}
			c.keepSchema(version, schemaDoc{read: time.Now(), failed: true})
		}
		return routes.Schema{}
	}
	for k, s := range kinds {
		if s != (routes.Schema{}) && (!known || old.kinds[k] != s) {
			log.WithFields(logrus.Fields{"kind": string(k), "lacksRuleNames": s.LacksRuleNames, "lacksMirrorPercent": s.LacksMirrorPercent}).
				Info("the installed CRD lacks fields of newer Gateway API releases; the plugin writes what it adds without them")
		}
	}
	c.keepSchema(version, schemaDoc{kinds: kinds, read: time.Now()})
	return kinds[kind]
}

func (c *Cluster) cachedSchema(version string) (schemaDoc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.schemas[version]
	if !ok {
		return schemaDoc{}, false
	}
	return d, d.complete() || time.Since(d.read) < schemaRecheck
}

func (c *Cluster) keepSchema(version string, d schemaDoc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.schemas[version] = d
}

// complete says the document was read and no kind lacks a field.
func (d schemaDoc) complete() bool {
	if d.failed {
		return false
	}
	for _, s := range d.kinds {
		if s != (routes.Schema{}) {
			return false
		}
	}
	return true
}
