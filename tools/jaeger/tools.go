//go:build tools

// Package tools pins the Jaeger v2 all-in-one binary that the end-to-end
// tracing test and `make jaeger` build. It is a separate module so that
// Jaeger's large dependency graph never enters the leasehold module.
package tools

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
