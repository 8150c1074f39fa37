package jobtrace

import (
	"errors"
	"fmt"
)

// ErrConfig is returned by [New], and by otelsetup.Setup, when an option or an
// OTEL_* environment variable holds a value that cannot be used.
var ErrConfig = errors.New("tracing: invalid configuration")

// ConfigError names the setting that [ErrConfig] is about.
type ConfigError struct {
	// Setting is the option or environment variable, e.g. "OTEL_TRACES_SAMPLER".
	Setting string
	// Value is the rejected value. It never holds header values or other
	// secrets: for those it is empty.
	Value string
	// Err is the underlying cause, if any.
	Err error
}

// Error implements error.
func (e *ConfigError) Error() string {
	msg := "tracing: invalid " + e.Setting
	if e.Value != "" {
		msg += fmt.Sprintf(" %q", e.Value)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }
