module example.com/lockbench-library

go 1.26.8

require github.com/lockbench/lockbench v0.0.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2 // indirect
	github.com/anishathalye/porcupine v1.3.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	gonum.org/v1/gonum v0.16.0 // indirect
)

replace github.com/lockbench/lockbench => ../..
