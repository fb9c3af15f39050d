/**
 * The nginx arm: Debian's nginx as its users run it in front of S3 — a caching reverse proxy
 * with `proxy_cache` and `slice 1m` (every 1 MiB slice of an object is fetched and cached on its
 * own, so a range read caches only the slices it touches), one worker process, keep-alive to
 * the origin, sendfile on, the cache on the same disk as the Talon worker's.
 *
 * `tcp_nopush` stays off (nginx's default) although Debian's sample nginx.conf turns it on: with
 * it on, a range that ends inside a cached slice sat corked ~40-50 ms on a keep-alive connection
 * (measured: 64 KiB ranges 45-90 ms each, 1-5 ms with it off), and the bench compares against
 * nginx at its best.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const CANDIDATES = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"]

export const INSTALL_HINT =
  "The nginx arm needs nginx with the slice module (Debian and Ubuntu build it in): `sudo apt-get install -y nginx-light` " +
  "(or `nginx`), or set NGINX=/path/to/nginx. No service needs to run: the bench starts its own nginx on a loopback port."

/** The nginx binary and its version, or why there is none. */
export const findNginx = (): { readonly bin: string; readonly version: string } | { readonly missing: string } => {
  const bin = process.env.NGINX ?? CANDIDATES.find((c) => existsSync(c))
  if (bin === undefined) return { missing: "nginx was not found" }
  // `nginx -V` prints to stderr.
  const r = spawnSync(bin, ["-V"], { encoding: "utf8" })
  if (r.error !== undefined) return { missing: `${bin} -V failed: ${r.error.message}` }
  return check(bin, `${r.stdout}${r.stderr}`)
}

const check = (bin: string, text: string) => {
  if (!/--with-http_slice_module/.test(text)) return { missing: `${bin} was built without the slice module (--with-http_slice_module)` }
  return { bin, version: /nginx version: (\S+)/.exec(text)?.[1] ?? "unknown" }
}

/** Writes `dir/nginx.conf` for a cache in `dir/cache` in front of `originPort`; the argv that runs it in the foreground. */
export const nginxCommand = (bin: string, dir: string, listenPort: number, originPort: number): ReadonlyArray<string> => {
  for (const d of ["cache", "tmp", "logs"]) mkdirSync(join(dir, d), { recursive: true })
  // As root, nginx's workers would switch to `nobody` and could not write the cache under a 0700 temp dir.
  const user = process.getuid?.() === 0 ? "user root;\n" : ""
  const conf = `${user}worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush off;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=s3:16m max_size=4g inactive=1h use_temp_path=off;
  upstream origin {
    server 127.0.0.1:${originPort};
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${listenPort};
    location / {
      slice 1m;
      proxy_cache s3;
      proxy_cache_key $uri$is_args$args$slice_range;
      proxy_set_header Range $slice_range;
      proxy_cache_valid 200 206 1h;
      proxy_cache_lock on;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host 127.0.0.1:${originPort};
      proxy_pass http://origin;
    }
  }
}
`
  writeFileSync(join(dir, "nginx.conf"), conf)
  return [bin, "-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "logs/error.log")]
}

/** The master's children (the worker), from /proc. */
export const childrenOf = (pid: number): ReadonlyArray<number> => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .split(/\s+/)
      .filter((s) => s !== "")
      .map(Number)
  } catch {
    return []
  }
}
