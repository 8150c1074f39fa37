package leasehold

import (
	"fmt"
	"reflect"
	"time"

	"github.com/leasehold/leasehold/tracing"
)

// A setting the worker shares with the layers it builds (the lease manager,
// the idempotency store, the compensation runner, the tracer) has one place
// among the worker's options: placeOf. The same setting given to a layer
// through WithLeaseOptions, WithIdempotencyOptions, WithCompensation or
// WithTracing must agree with it; New refuses two different values with
// ErrConflictingOptions instead of letting one silently win. A setting given
// only to a layer is taken as the worker's.

// Settings the worker shares with its layers, by the name errors give them.
const (
	settingLeaseTTL  = "lease TTL"
	settingRetention = "retention"
	settingPrefix    = "key prefix"
	settingTP        = "tracer provider"
	settingMP        = "meter provider"
	settingProp      = "propagator"
)

// placeOf is the worker option that is the one place of each setting.
var placeOf = map[string]string{
	settingLeaseTTL:  "WithLeaseTTL",
	settingRetention: "WithRetention",
	settingPrefix:    "WithKeyPrefix",
	settingTP:        "WithTracerProvider",
	settingMP:        "WithMeterProvider",
	settingProp:      "WithPropagator",
}

// layerSetting is implemented by the options of package lease, idempotency
// and compensation that make a setting the worker shares (their unexported
// setting type).
type layerSetting interface {
	Setting() (name string, value any)
}

// layerNames maps a layer option's setting name to the worker's.
var layerNames = map[string]string{
	"ttl":             settingLeaseTTL,
	"retention":       settingRetention,
	"prefix":          settingPrefix,
	"tracer provider": settingTP,
	"meter provider":  settingMP,
}

// given is one value given for a setting, and the option that gave it.
type given struct {
	from  string
	value any
}

// agreement collects the values given for each shared setting; the first
// one stands and a different later one is a conflict.
type agreement map[string]given

func (a agreement) give(setting, from string, v any) error {
	g, ok := a[setting]
	if !ok {
		a[setting] = given{from: from, value: v}
		return nil
	}
	if sameSetting(g.value, v) {
		return nil
	}
	return conflict(setting, g, given{from: from, value: v})
}

// conflict is the one-sentence error naming both options.
func conflict(setting string, a, b given) error {
	return fmt.Errorf("%w: %s sets the %s to %s and %s to %s; set it once, with %s",
		ErrConflictingOptions, a.from, setting, showSetting(a.value), b.from, showSetting(b.value), placeOf[setting])
}

// showSetting prints a setting's value: plain values as they are, others
// (providers, functions) by type.
func showSetting(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case time.Duration, int, bool, []string:
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("a %T", v)
}

// sameSetting reports whether two values of a setting agree: equal values
// of one type (providers by identity, functions never).
func sameSetting(a, b any) (same bool) {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	switch {
	case ta != tb:
		return false
	case ta == nil:
		return true
	case ta.Kind() == reflect.Func:
		return false
	case ta.Comparable():
		defer func() {
			if recover() != nil { // a struct holding an incomparable value
				same = reflect.DeepEqual(a, b)
			}
		}()
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// settle gathers every shared setting from the worker's options and the
// layers' options, refuses contradictions, and leaves the agreed values in
// c (zero where nothing was given, for New's defaults).
func (c *config) settle() error {
	a := agreement{}
	var errs []error
	give := func(setting, from string, v any) {
		if err := a.give(setting, from, v); err != nil && len(errs) == 0 {
			errs = append(errs, err)
		}
	}
	if c.leaseTTL != 0 {
		give(settingLeaseTTL, "WithLeaseTTL", c.leaseTTL)
	}
	if c.retention != 0 {
		give(settingRetention, "WithRetention", c.retention)
	}
	if c.keyPrefix != "" {
		give(settingPrefix, "WithKeyPrefix", c.keyPrefix)
	}
	if c.tp != nil {
		give(settingTP, "WithTracerProvider", c.tp)
	}
	if c.mp != nil {
		give(settingMP, "WithMeterProvider", c.mp)
	}
	if c.prop != nil {
		give(settingProp, "WithPropagator", c.prop)
	}
	if c.tracer != nil {
		tp, mp, prop := c.tracer.OTelProviders()
		give(settingTP, "WithTracing's Tracer", tp)
		give(settingMP, "WithTracing's Tracer", mp)
		give(settingProp, "WithTracing's Tracer", prop)
	}
	for _, o := range c.leaseOpts {
		giveLayer(give, o, "lease", "WithLeaseOptions")
	}
	for _, o := range c.idemOpts {
		giveLayer(give, o, "idempotency", "WithIdempotencyOptions")
	}
	for _, o := range c.compOpts {
		giveLayer(give, o, "compensation", "WithCompensation")
	}
	if len(errs) > 0 {
		return errs[0]
	}
	take(a, settingLeaseTTL, &c.leaseTTL)
	take(a, settingRetention, &c.retention)
	take(a, settingPrefix, &c.keyPrefix)
	take(a, settingTP, &c.tp)
	take(a, settingMP, &c.mp)
	take(a, settingProp, &c.prop)
	return nil
}

// giveLayer gives the setting a layer option o makes, if it makes one the
// worker shares.
func giveLayer(give func(setting, from string, v any), o any, pkg, via string) {
	ls, ok := o.(layerSetting)
	if !ok {
		return
	}
	name, v := ls.Setting()
	setting, ok := layerNames[name]
	if !ok || (setting == settingPrefix && v == "") {
		return
	}
	fn := map[string]string{settingLeaseTTL: "WithTTL", settingRetention: "WithRetention", settingPrefix: "WithPrefix",
		settingTP: "WithTracerProvider", settingMP: "WithMeterProvider"}[setting]
	give(setting, fmt.Sprintf("%s.%s in %s", pkg, fn, via), v)
}

// take sets *dst to the agreed value of setting, if one was given.
func take[T any](a agreement, setting string, dst *T) {
	if g, ok := a[setting]; ok {
		if v, ok := g.value.(T); ok {
			*dst = v
		}
	}
}

// telemetry gives the worker one Tracer: WithTracing's, or one over the
// agreed providers (the OpenTelemetry globals where none was given, as in
// every layer); afterwards c's providers are the Tracer's, for the lease
// manager.
func (c *config) telemetry() error {
	if c.tracer == nil {
		t, err := tracing.New(tracing.WithTracerProvider(c.tp), tracing.WithMeterProvider(c.mp),
			tracing.WithPropagator(c.prop), tracing.WithConsumerGroup(c.group))
		if err != nil {
			return fmt.Errorf("leasehold: telemetry: %w", err)
		}
		c.tracer = t
	}
	c.tp, c.mp, c.prop = c.tracer.OTelProviders()
	return nil
}
