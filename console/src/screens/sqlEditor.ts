// In charge of the SQL editor: CodeMirror 6 with the SQL dialect of the query's connection. Loaded
// on demand (import()), so the first screen does not carry it.
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

export function mountEditor(parent: HTMLElement, text: string, dialect: DialectName, labelledBy: string, onChange: (text: string) => void): SqlEditor {
  const language = new Compartment();
  const view = new EditorView({
    parent,
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
        EditorView.contentAttributes.of({ 'aria-labelledby': labelledBy, 'aria-multiline': 'true' }),
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
    destroy: () => view.destroy(),
  };
}
