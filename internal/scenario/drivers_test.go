package scenario

// The shipped scenarios run drivers (backends/driver registers the driver
// backend, as bench's own import does).
import _ "github.com/lockbench/lockbench/backends/driver"
