// The bare echo of `bench driver perf`: every line read on stdin written
// back on stdout, read and written as lease.js does (utf8 'data' chunks
// split into lines, one process.stdout.write per batch of answers). Beside
// a driver's protocol round trip it is the physical limit of the hop
// between the two runtimes.
'use strict';

let rest = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  const lines = (rest + chunk).split('\n');
  rest = lines.pop();
  if (lines.length > 0) {
    process.stdout.write(lines.join('\n') + '\n');
  }
});
process.stdin.on('end', () => process.exit(0));
