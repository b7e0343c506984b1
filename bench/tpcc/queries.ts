// The seed's three TPC-C queries and the governed key's policy, in one place for bench/tpcc/run.ts
// and bench/governance.ts (which measures this allow-list and these masks). Imports nothing, so the
// governance bench's fresh child processes load no driver.
import type { MaskRule } from '../../src/governance/masking.js';

export const SQL = {
  customer: `SELECT c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, c_city, c_state, c_zip, c_phone,
  c_since, c_credit, c_credit_lim, c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data
FROM customer WHERE c_w_id = :w_id AND c_d_id = :d_id AND c_id = :c_id`,
  // TPC-C order-status (§2.6.2) in one statement: the customer, and the lines of their newest order.
  order_status: `SELECT c.c_first, c.c_middle, c.c_last, c.c_balance, o.o_id, o.o_entry_d, o.o_carrier_id,
  ol.ol_number, ol.ol_i_id, ol.ol_supply_w_id, ol.ol_quantity, ol.ol_amount, ol.ol_delivery_d
FROM orders o
JOIN customer c ON c.c_w_id = o.o_w_id AND c.c_d_id = o.o_d_id AND c.c_id = o.o_c_id
JOIN order_line ol ON ol.ol_w_id = o.o_w_id AND ol.ol_d_id = o.o_d_id AND ol.ol_o_id = o.o_id
WHERE o.o_w_id = :w_id AND o.o_d_id = :d_id
  AND o.o_id = (SELECT MAX(o2.o_id) FROM orders o2 WHERE o2.o_w_id = :w_id AND o2.o_d_id = :d_id AND o2.o_c_id = :c_id)
ORDER BY ol.ol_number`,
  // TPC-C stock-level (§2.8.2): distinct items below the threshold among the district's last 20 orders.
  stock_level: `SELECT COUNT(DISTINCT s.s_i_id) AS low_stock
FROM district d
JOIN order_line ol ON ol.ol_w_id = d.d_w_id AND ol.ol_d_id = d.d_id
  AND ol.ol_o_id < d.d_next_o_id AND ol.ol_o_id >= d.d_next_o_id - 20
JOIN stock s ON s.s_w_id = ol.ol_w_id AND s.s_i_id = ol.ol_i_id
WHERE d.d_w_id = :w_id AND d.d_id = :d_id AND s.s_quantity < :threshold`,
} as const;

export const ALLOWED_TABLES = ['customer', 'district', 'order_line', 'orders', 'stock'];
export const MASK: MaskRule[] = [
  { column: 'customer.c_last', action: 'hash' },
  { column: '*.c_data', action: 'mask' },
];
