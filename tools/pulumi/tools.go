//go:build tools

// Package tools pins the pulumi CLI the end-to-end tests and examples drive through the Automation API.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
