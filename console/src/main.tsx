// The console's entry: sign-in, then the screens behind a hash route (#/connections ...), so every
// screen is a link and the server only ever serves index.html for /console.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, call, session } from './api';
import { Connections } from './screens/connections';
import { History } from './screens/history';
import { Keys } from './screens/keys';
import { Overview } from './screens/overview';
import { Queries } from './screens/queries';
import { Settings } from './screens/settings';
import { TextField } from './ui';
import './style.css';

const SCREENS = [
  { path: 'overview', label: 'Overview', view: Overview },
  { path: 'connections', label: 'Connections', view: Connections },
  { path: 'queries', label: 'Saved queries', view: Queries },
  { path: 'keys', label: 'API keys', view: Keys },
  { path: 'history', label: 'History', view: History },
  { path: 'settings', label: 'Settings', view: Settings },
] as const;

function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function SignIn({ onDone }: { onDone: () => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      // Who the secret names: every administrator may read it, a scoped key is admin_only.
      await call('GET', '/api/v1/me', undefined, key.trim());
      session.signIn(key.trim());
      onDone();
    } catch (err) {
      const ae = err as ApiError;
      setError(ae.code === 'admin_only' ? 'This is an API key: the console needs the admin key or an administrator token.' : ae.message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>QueryAPIGate console</h1>
      <form onSubmit={submit} aria-label="Sign in">
        <TextField
          label="Admin key or token"
          type="password"
          name="admin-key"
          autocomplete="current-password"
          value={key}
          onInput={setKey}
          error={error}
          hint="The admin key or your administrator token (qagadm_...), kept in this tab's session storage only."
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(() => !!session.key());
  const route = useRoute();
  // A key that stopped working (server restarted with another) sends the user back to sign in.
  useEffect(() => {
    const on = (e: PromiseRejectionEvent) => {
      if (e.reason instanceof ApiError && e.reason.status === 401) {
        session.signOut();
        setSignedIn(false);
      }
    };
    addEventListener('unhandledrejection', on);
    return () => removeEventListener('unhandledrejection', on);
  }, []);
  useEffect(() => {
    document.getElementById('page-title')?.focus();
  }, [route[0]]);
  if (!signedIn) return <SignIn onDone={() => setSignedIn(true)} />;
  const screen = SCREENS.find((s) => s.path === route[0]) ?? SCREENS[0];
  const View = screen.view;
  document.title = `${screen.label} - QueryAPIGate console`;
  return (
    <div class="shell">
      <button type="button" class="skip" onClick={() => document.getElementById('main')?.focus()}>
        Skip to content
      </button>
      <nav aria-label="Screens">
        <p class="brand">QueryAPIGate</p>
        <ul>
          {SCREENS.map((s) => (
            <li key={s.path}>
              <a href={`#/${s.path}`} aria-current={s === screen ? 'page' : undefined}>
                {s.label}
              </a>
            </li>
          ))}
        </ul>
        <button
          type="button"
          class="link"
          onClick={() => {
            session.signOut();
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </nav>
      <main id="main" tabIndex={-1}>
        <View route={route.slice(1)} />
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
