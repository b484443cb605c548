// Node's `https` module through the proxy `sluice run` names in HTTPS_PROXY, with a small
// CONNECT agent (Node 20's https does not read HTTPS_PROXY by itself). Trust comes from
// NODE_EXTRA_CA_CERTS, read by Node at start-up; nothing here names a CA.
//
// usage: node https-connect.mjs URL OUT_FILE
// POSTs "echo $API_TOKEN" with `Authorization: Bearer $API_TOKEN`, writes the response body
// to OUT_FILE and prints "STATUS BODY".
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';

const [url, outFile] = process.argv.slice(2);
const target = new URL(url);
const proxy = new URL(process.env.HTTPS_PROXY);

class ConnectAgent extends https.Agent {
  createConnection(options, callback) {
    const authority = `${options.host}:${options.port}`;
    const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
    const connect = http.request({
      host: proxy.hostname,
      port: proxy.port,
      method: 'CONNECT',
      path: authority,
      headers: {
        host: authority,
        'proxy-authorization': `Basic ${Buffer.from(credentials).toString('base64')}`,
      },
    });
    connect.once('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        callback(new Error(`proxy answered CONNECT with ${res.statusCode}`));
        return;
      }
      callback(null, tls.connect({ socket, servername: options.servername || options.host }));
    });
    connect.once('error', callback);
    connect.end();
  }
}

const token = process.env.API_TOKEN;
const body = `echo ${token}`;
const req = https.request(
  url,
  {
    method: 'POST',
    agent: new ConnectAgent({ keepAlive: false }),
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'text/plain',
      'content-length': Buffer.byteLength(body),
    },
  },
  (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      fs.writeFileSync(outFile, text);
      console.log(`${res.statusCode} ${text}`);
      process.exitCode = res.statusCode === 200 ? 0 : 1;
    });
  },
);
req.on('error', (e) => {
  console.error(`https request failed: ${e.message}`);
  process.exitCode = 2;
});
req.end(body);
