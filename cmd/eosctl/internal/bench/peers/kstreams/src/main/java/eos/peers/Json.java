package eos.peers;

import java.math.BigDecimal;

/** JSON output helpers: strings and numbers as eos's verifiers (Go's encoding/json) read them back. */
final class Json {
    private Json() {}

    static String string(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /**
     * A finite double as JSON that parses back to the same double: whole numbers without a fraction,
     * others as Double.toString when that round-trips, else as the double's exact decimal value.
     */
    static String number(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e15) {
            return Long.toString((long) v);
        }
        String s = Double.toString(v);
        if (Double.parseDouble(s) == v) {
            return s;
        }
        return new BigDecimal(v).toString();
    }
}
