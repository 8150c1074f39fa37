package leasehold

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
	settingGroup     = "consumer group"
	settingTopics    = "consumed topics"
	settingCommit    = "autocommit interval"
)

// placeOf is the worker option that is the one place of each setting.
var placeOf = map[string]string{
	settingLeaseTTL:  "WithLeaseTTL",
	settingRetention: "WithRetention",
	settingPrefix:    "WithKeyPrefix",
	settingTP:        "WithTracerProvider",
	settingMP:        "WithMeterProvider",
	settingProp:      "WithPropagator",
	settingGroup:     "WithGroup",
	settingTopics:    "WithTopics",
	settingCommit:    "WithCommitInterval",
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
	advice := "leave it out of WithKafka, the worker sets it"
	if p, ok := placeOf[setting]; ok {
		advice = "set it once, with " + p
	}
	return fmt.Errorf("%w: %s sets the %s to %s and %s to %s; %s",
		ErrConflictingOptions, a.from, setting, showSetting(a.value), b.from, showSetting(b.value), advice)
}

// showSetting prints a setting's value: plain values as they are, others
// (providers, functions) by type.
func showSetting(v any) string {
	switch v := v.(type) {
	case workerOwned:
		return string(v)
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
		return reflect.ValueOf(a).IsNil() && reflect.ValueOf(b).IsNil()
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

// kafkaAndTelemetry checks the Kafka options and builds the Tracer, once
// New has applied its defaults.
func (c *config) kafkaAndTelemetry() error {
	if err := c.checkKafka(); err != nil {
		return err
	}
	return c.telemetry()
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

// groupOpt is a consumer-group setting the worker makes on its Kafka client
// (kafkaClient): the kgo option, the setting's name and the worker's value,
// as normal reads franz-go's.
type groupOpt struct {
	opt     any
	name    string
	setting string
	worker  any
}

// workerOwned is the value shown for a setting only the worker makes.
type workerOwned string

// groupOpts lists the consumer-group settings the worker makes itself.
func (c *config) groupOpts() []groupOpt {
	topics := slices.Sorted(slices.Values(c.topics))
	return []groupOpt{
		{kgo.ConsumerGroup, "kgo.ConsumerGroup", settingGroup, c.group},
		{kgo.ConsumeTopics, "kgo.ConsumeTopics", settingTopics, topics},
		{kgo.ConsumeRegex, "kgo.ConsumeRegex", "topic matching", false},
		{kgo.Balancers, "kgo.Balancers", "group balancers", []string{kgo.CooperativeStickyBalancer().ProtocolName()}},
		{kgo.ConsumeResetOffset, "kgo.ConsumeResetOffset", "reset offset", kgo.NewOffset().AtStart()},
		{kgo.AutoCommitInterval, "kgo.AutoCommitInterval", settingCommit, c.commitInterval},
		{kgo.DisableAutoCommit, "kgo.DisableAutoCommit", "autocommit switch", false},
	}
}

// groupCallbacks are the partition callbacks the worker sets itself; franz-go
// wraps them when it joins a group, so they are found among the options by
// the constructor that made the option (madeBy), not by their value.
var groupCallbacks = []any{kgo.OnPartitionsAssigned, kgo.OnPartitionsRevoked, kgo.OnPartitionsLost}

// funcName is the last element of a function's name ("OnPartitionsLost").
func funcName(fn any) string {
	name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	return name[strings.LastIndexByte(name, '.')+1:]
}

// madeBy reports whether the franz-go option o was made by the option
// constructor ctor: o wraps a closure of ctor's, named "<caller or
// package>.<ctor>.funcN" (also where the compiler inlined ctor into its
// caller). franz-go reads its options' names the same way (OptValue).
func madeBy(o kgo.Opt, ctor any) bool {
	v := reflect.ValueOf(o)
	if v.Kind() != reflect.Struct || v.NumField() != 1 || v.Field(0).Kind() != reflect.Func || v.Field(0).IsNil() {
		return false
	}
	name := runtime.FuncForPC(v.Field(0).Pointer()).Name()
	return strings.Contains(name, "."+funcName(ctor)+".func")
}

// checkKafka refuses a consumer-group option given with WithKafka that the
// worker sets itself to another value (kafkaClient's would silently win).
// It reads the options through franz-go's own (kgo.Client.OptValue) on
// clients that are built and closed at once, without a network call: an
// option counts as given when its value differs from franz-go's default.
func (c *config) checkKafka() error {
	if len(c.kafkaOpts) == 0 {
		return nil
	}
	for _, o := range c.kafkaOpts {
		for _, cb := range groupCallbacks {
			if madeBy(o, cb) {
				return conflict("partition callbacks", given{from: "the worker", value: workerOwned("its own")},
					given{from: "kgo." + funcName(cb) + " in WithKafka", value: workerOwned("another")})
			}
		}
	}
	// Group options are valid only with a group: both probes have one, which
	// the caller's options override; the heartbeat interval is left to
	// franz-go, as the worker derives it from the session timeout
	// (groupTimeouts).
	probe := []kgo.Opt{kgo.ConsumerGroup("leasehold\x00probe"), kgo.HeartbeatInterval(0)}
	base, err := kgo.NewClient(probe...)
	if err != nil {
		return fmt.Errorf("leasehold: kafka options: %w", err)
	}
	defer base.Close()
	user, err := kgo.NewClient(append(probe, c.kafkaOpts...)...)
	if err != nil {
		// An invalid combination: the client Start builds, with the
		// options the worker derives, reports it.
		return nil //nolint:nilerr // not this check's error to report
	}
	defer user.Close()
	for _, g := range c.groupOpts() {
		uv, bv := normal(user.OptValue(g.opt)), normal(base.OptValue(g.opt))
		if sameSetting(uv, bv) || sameSetting(uv, g.worker) {
			continue // not given (or given as franz-go's default), or agreeing
		}
		from := "the worker"
		if _, ok := placeOf[g.setting]; ok {
			from = placeOf[g.setting]
		}
		return conflict(g.setting, given{from: from, value: g.worker}, given{from: g.name + " in WithKafka", value: uv})
	}
	return nil
}

// normal puts an option value as franz-go returns it in a comparable form:
// topics as sorted names, balancers as protocol names.
func normal(v any) any {
	switch v := v.(type) {
	case map[string]*regexp.Regexp:
		return slices.Sorted(maps.Keys(v))
	case []kgo.GroupBalancer:
		names := make([]string, len(v))
		for i, b := range v {
			names[i] = b.ProtocolName()
		}
		return names
	}
	return v
}
