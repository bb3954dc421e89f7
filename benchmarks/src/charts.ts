/** Hand-written SVG bar charts: two panels side by side (e.g. throughput left, latency right). */

export interface ChartRow {
  label: string;
  /** Picks the hue: each library keeps its colour in every chart. */
  library: string;
  /** One value per series; null draws nothing (not measured). */
  values: (number | null)[];
}

export interface ChartPanel {
  title: string;
  /** Appended to every value label, e.g. ' µs'. */
  unit: string;
  /** Series names (legend); each row has one bar per series. */
  series: string[];
  rows: ChartRow[];
  /** Formats a value for its label; default 3 significant digits. */
  format?: (value: number) => string;
}

export interface Chart {
  title: string;
  /** One or two lines under the title: how it was measured, in short. */
  caption: string[];
  left: ChartPanel;
  right: ChartPanel;
}

const HUES: Readonly<Record<string, number>> = {
  ratecard: 210,
  'rate-limiter-flexible': 25,
  limiter: 130,
  baseline: 270,
};

const WIDTH = 1100;
const PANEL_WIDTH = 530;
const LABEL_WIDTH = 250;
const BAR_HEIGHT = 14;
const BAR_GAP = 3;
const ROW_GAP = 10;
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"';

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function defaultFormat(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${Number((value / 1e6).toPrecision(3))} M`;
  if (abs >= 1e4) return `${Number((value / 1e3).toPrecision(3))} k`;
  return String(Number(value.toPrecision(3)));
}

function colour(library: string, series: number): string {
  const hue = HUES[library] ?? 0;
  const lightness = 42 + series * 22;
  return `hsl(${hue}, 60%, ${lightness}%)`;
}

/** Rows are as tall in both panels (the taller of the two), so a row on the left faces the same row on the right. */
function rowHeight(chart: Chart): number {
  const bars = Math.max(chart.left.series.length, chart.right.series.length);
  return bars * (BAR_HEIGHT + BAR_GAP) - BAR_GAP + ROW_GAP;
}

function panelHeight(panel: ChartPanel, rowSpan: number): number {
  return 48 + panel.rows.length * rowSpan;
}

function drawPanel(panel: ChartPanel, x0: number, y0: number, rowSpan: number): string {
  const parts: string[] = [];
  const format = panel.format ?? defaultFormat;
  const max = Math.max(0, ...panel.rows.flatMap((row) => row.values.filter((v): v is number => v !== null)));
  const barSpace = PANEL_WIDTH - LABEL_WIDTH - 80;
  parts.push(`<text x="${x0}" y="${y0 + 14}" font-size="14" font-weight="600" ${FONT}>${escape(panel.title)}</text>`);
  // Legend: one swatch per series, in the first library's hue shades (grey when the series are just one).
  panel.series.forEach((name, i) => {
    const lx = x0 + i * 110;
    const shade = panel.series.length === 1 ? '#888' : `hsl(0, 0%, ${35 + i * 25}%)`;
    parts.push(`<rect x="${lx}" y="${y0 + 24}" width="10" height="10" fill="${shade}"/>`);
    parts.push(`<text x="${lx + 14}" y="${y0 + 33}" font-size="11" ${FONT}>${escape(name)}</text>`);
  });
  let y = y0 + 48;
  for (const row of panel.rows) {
    const middle = y + (rowSpan - ROW_GAP) / 2;
    parts.push(
      `<text x="${x0 + LABEL_WIDTH - 8}" y="${middle + 4}" font-size="11" text-anchor="end" ${FONT}>${escape(row.label)}</text>`,
    );
    const used = row.values.length * (BAR_HEIGHT + BAR_GAP) - BAR_GAP;
    row.values.forEach((value, i) => {
      const by = y + (rowSpan - ROW_GAP - used) / 2 + i * (BAR_HEIGHT + BAR_GAP);
      if (value === null || !Number.isFinite(value)) {
        parts.push(
          `<text x="${x0 + LABEL_WIDTH}" y="${by + BAR_HEIGHT - 3}" font-size="10" fill="#999" ${FONT}>not measured</text>`,
        );
        return;
      }
      const width = max === 0 ? 0 : Math.max(1, (value / max) * barSpace);
      parts.push(
        `<rect x="${x0 + LABEL_WIDTH}" y="${by}" width="${width.toFixed(1)}" height="${BAR_HEIGHT}" fill="${colour(row.library, i)}"/>`,
      );
      parts.push(
        `<text x="${(x0 + LABEL_WIDTH + width + 4).toFixed(1)}" y="${by + BAR_HEIGHT - 3}" font-size="10" ${FONT}>${escape(format(value) + panel.unit)}</text>`,
      );
    });
    y += rowSpan;
  }
  return parts.join('\n');
}

/** The SVG text of a two-panel chart. */
export function renderChart(chart: Chart): string {
  const top = 30 + chart.caption.length * 15 + 12;
  const rowSpan = rowHeight(chart);
  const height = top + Math.max(panelHeight(chart.left, rowSpan), panelHeight(chart.right, rowSpan)) + 10;
  const caption = chart.caption
    .map((line, i) => `<text x="20" y="${44 + i * 15}" font-size="11" fill="#555" ${FONT}>${escape(line)}</text>`)
    .join('\n');
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="20" y="24" font-size="17" font-weight="700" ${FONT}>${escape(chart.title)}</text>`,
    caption,
    drawPanel(chart.left, 20, top, rowSpan),
    drawPanel(chart.right, 20 + PANEL_WIDTH + 20, top, rowSpan),
    '</svg>',
    '',
  ].join('\n');
}
