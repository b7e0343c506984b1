// In charge of the SQL editor: CodeMirror 6 with the SQL dialect of the query's connection. Loaded
// on demand (import()), so the first screen does not carry it. It lives in a shadow root: there
// CodeMirror's styles are constructed style sheets, which the console's CSP allows, where in the
// document they would be <style> elements, which it refuses.
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { MySQL, PostgreSQL, SQLite, sql } from '@codemirror/lang-sql';
import { defaultHighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { Compartment, EditorState } from '@codemirror/state';
import { EditorView, keymap, lineNumbers } from '@codemirror/view';

const DIALECTS = { postgres: PostgreSQL, mysql: MySQL, sqlite: SQLite } as const;
export type DialectName = keyof typeof DIALECTS;

export interface SqlEditor {
  setDialect(d: DialectName): void;
  setText(text: string): void;
  destroy(): void;
}

const THEME = EditorView.theme({
  '&': { minHeight: '120px', backgroundColor: '#fff', fontSize: '14px' },
  '.cm-scroller': { minHeight: '120px', fontFamily: 'ui-monospace, monospace' },
  '.cm-gutters': { backgroundColor: '#f0f0f0', color: '#555' },
  '&.cm-focused': { outline: '3px solid #e8a400' },
});

export function mountEditor(parent: HTMLElement, text: string, dialect: DialectName, label: string, onChange: (text: string) => void): SqlEditor {
  const language = new Compartment();
  const root = parent.shadowRoot ?? parent.attachShadow({ mode: 'open' });
  const host = document.createElement('div');
  root.appendChild(host);
  const view = new EditorView({
    parent: host,
    root,
    state: EditorState.create({
      doc: text,
      extensions: [
        lineNumbers(),
        history(),
        // No Tab binding: Tab leaves the editor, so the form stays usable by keyboard.
        keymap.of([...defaultKeymap, ...historyKeymap]),
        syntaxHighlighting(defaultHighlightStyle),
        language.of(sql({ dialect: DIALECTS[dialect] })),
        EditorView.lineWrapping,
        THEME,
        // A label by id cannot cross the shadow root: the label's text itself.
        EditorView.contentAttributes.of({ 'aria-label': label, 'aria-multiline': 'true' }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    setDialect: (d) => view.dispatch({ effects: language.reconfigure(sql({ dialect: DIALECTS[d] })) }),
    setText(t) {
      if (t !== view.state.doc.toString()) view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: t } });
    },
    destroy() {
      view.destroy();
      host.remove();
    },
  };
}
