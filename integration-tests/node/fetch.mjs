// `fetch` from undici with its EnvHttpProxyAgent, which reads HTTPS_PROXY / NO_PROXY as
// `sluice run` sets them (Node 20's global fetch ignores them). Trust comes from
// NODE_EXTRA_CA_CERTS, read by Node at start-up; nothing here names a CA.
//
// usage: node fetch.mjs URL OUT_FILE
// POSTs "echo $API_TOKEN" with `Authorization: Bearer $API_TOKEN`, writes the response body
// to OUT_FILE and prints "STATUS BODY".
import fs from 'node:fs';
import { EnvHttpProxyAgent, fetch } from 'undici';

const [url, outFile] = process.argv.slice(2);
const token = process.env.API_TOKEN;
try {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
    body: `echo ${token}`,
    dispatcher: new EnvHttpProxyAgent(),
  });
  const text = await res.text();
  fs.writeFileSync(outFile, text);
  console.log(`${res.status} ${text}`);
  process.exitCode = res.status === 200 ? 0 : 1;
} catch (e) {
  console.error(`fetch failed: ${e.message} ${e.cause ? e.cause.message : ''}`);
  process.exitCode = 2;
}
