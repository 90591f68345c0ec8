// STAND-IN for actions/upload-artifact@v4 under act (see action.yml): the
// file selection of the official action for plain paths (a single
// directory is the artifact's root, several paths their common ancestor;
// hidden names skipped unless include-hidden-files), uploaded with the
// official @actions/artifact client.
import { DefaultArtifactClient } from '@actions/artifact';
import * as core from '@actions/core';
import fs from 'node:fs';
import path from 'node:path';

const hidden = (name) => name.startsWith('.');

function collect(p, includeHidden, out) {
  const st = fs.statSync(p);
  if (!st.isDirectory()) {
    out.push(p);
    return;
  }
  for (const e of fs.readdirSync(p, { withFileTypes: true })) {
    if (!includeHidden && hidden(e.name)) continue;
    collect(path.join(p, e.name), includeHidden, out);
  }
}

function commonAncestor(dirs) {
  let root = dirs[0];
  for (const d of dirs.slice(1)) {
    while (d !== root && !d.startsWith(root + path.sep)) root = path.dirname(root);
  }
  return root;
}

async function main() {
  const name = core.getInput('name') || 'artifact';
  const lines = core.getMultilineInput('path', { required: true });
  const ifNone = core.getInput('if-no-files-found') || 'warn';
  const includeHidden = core.getBooleanInput('include-hidden-files');
  const retention = core.getInput('retention-days');
  if (!['warn', 'error', 'ignore'].includes(ifNone)) throw new Error(`if-no-files-found: unknown value ${ifNone}`);
  const ws = process.env.GITHUB_WORKSPACE || process.cwd();
  const paths = [];
  for (const l of lines) {
    if (/[*?[\]{}]/.test(l) || l.startsWith('!')) {
      throw new Error(`stand-in upload-artifact: globs and exclusions are not implemented (path ${JSON.stringify(l)})`);
    }
    const abs = path.resolve(ws, l);
    if (fs.existsSync(abs)) paths.push(abs);
  }
  const files = [];
  for (const p of paths) collect(p, includeHidden, files);
  if (files.length === 0) {
    const msg = `No files were found with the provided path: ${lines.join(', ')}. No artifacts will be uploaded.`;
    if (ifNone === 'error') throw new Error(msg);
    if (ifNone === 'warn') core.warning(msg);
    else core.info(msg);
    return;
  }
  const root = paths.length === 1 && fs.statSync(paths[0]).isDirectory()
    ? paths[0]
    : commonAncestor(paths.map((p) => (fs.statSync(p).isDirectory() ? p : path.dirname(p))));
  const options = {};
  if (retention !== '') {
    const n = Number(retention);
    if (!Number.isInteger(n) || n < 1 || n > 90) throw new Error(`retention-days: want 1-90, got ${retention}`);
    options.retentionDays = n;
  }
  const { id, size } = await new DefaultArtifactClient().uploadArtifact(name, files, root, options);
  core.info(`stand-in upload-artifact: ${files.length} file(s) from ${path.relative(ws, root) || '.'} as ${name} (id ${id}, ${size} bytes)`);
  core.setOutput('artifact-id', String(id));
}

main().catch((err) => core.setFailed(err.message));
