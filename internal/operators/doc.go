// Package operators holds Weir's built-in operators. Package all
// registers them, and the connectors, with a TaskManager's registry.
package operators
