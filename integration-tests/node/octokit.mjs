// Octokit (@octokit/rest) reading a repository with a GitHub App's installation token, as an
// agent's tooling would: `auth` is the token ($GH), its requests go through undici's
// EnvHttpProxyAgent (HTTPS_PROXY as `sluice run` sets it; Node 20's global fetch ignores
// it), trust from NODE_EXTRA_CA_CERTS.
//
// usage: node octokit.mjs API_ROOT OWNER REPO OTHER_REPO
// prints "octokit FULL_NAME" for REPO, and "octokit-refused STATUS" for OTHER_REPO.
import { Octokit } from '@octokit/rest';
import { EnvHttpProxyAgent, fetch } from 'undici';

const [baseUrl, owner, repo, other] = process.argv.slice(2);
const dispatcher = new EnvHttpProxyAgent();
const octokit = new Octokit({
  auth: process.env.GH,
  baseUrl,
  request: { fetch: (url, options) => fetch(url, { ...options, dispatcher }) },
});
try {
  const { data } = await octokit.rest.repos.get({ owner, repo });
  console.log(`octokit ${data.full_name}`);
  try {
    await octokit.rest.repos.get({ owner, repo: other });
    console.log('octokit-refused none');
  } catch (e) {
    console.log(`octokit-refused ${e.status}`);
  }
} catch (e) {
  console.error(`octokit failed: ${e.status} ${e.message}`);
  process.exitCode = 1;
}
