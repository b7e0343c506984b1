// In charge of naming the server's time zone (/health's `time_zone`) as the C library picks it: TZ, else the zone
// /etc/localtime links to. Not `Intl.DateTimeFormat().resolvedOptions()`: its first use loads ICU's locale data,
// 8 MiB of RSS for the life of the process (a load balancer's first health check paid it), and it names some
// zones by ICU's old ids (Asia/Calcutta for TZ=Asia/Kolkata) and others not at all.
// Imports nothing of ours.
import { readFileSync, readlinkSync } from 'node:fs';

/** An IANA zone name (Europe/Paris, America/Argentina/Buenos_Aires, UTC, EST5EDT), not a path or a POSIX rule. */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/;

/** The files a system without TZ reads its zone from (read here, so a test can point elsewhere). */
export interface ZoneFiles {
  localtime: string;
  timezone: string;
}
const SYSTEM: ZoneFiles = { localtime: '/etc/localtime', timezone: '/etc/timezone' };

/** The zone's name, or null when it cannot be named (a POSIX rule in TZ, a copied /etc/localtime without /etc/timezone). */
export function timeZoneName(tz: string | undefined, files: ZoneFiles = SYSTEM): string | null {
  if (tz !== undefined) {
    const value = tz.startsWith(':') ? tz.slice(1) : tz;
    if (value === '') return 'UTC'; // an empty TZ is UTC to the C library
    return named(value.includes('/zoneinfo/') ? value.slice(value.lastIndexOf('/zoneinfo/') + 10) : value);
  }
  let link: string;
  try {
    link = readlinkSync(files.localtime);
  } catch (e) {
    // No /etc/localtime: the C library takes UTC. A file that is not a link may be named by /etc/timezone.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 'UTC';
    try {
      return named(readFileSync(files.timezone, 'utf8').trim());
    } catch {
      return null;
    }
  }
  const at = link.lastIndexOf('zoneinfo/');
  return at < 0 ? null : named(link.slice(at + 9));
}

function named(name: string): string | null {
  return ZONE_NAME.test(name) ? name : null;
}

let cached: { zone: string | null } | null = null;

/** This process's zone, worked out on first use (TZ is read as the process started with it). */
export function serverTimeZone(): string | null {
  cached ??= { zone: timeZoneName(process.env.TZ) };
  return cached.zone;
}
