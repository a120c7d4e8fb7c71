# table-lib.sh -- the cell helpers of the side-by-side reports
# (compare-pt2pt.sh, compare-coll.sh). Sourced, not run. Raw files hold one
# line per size and repetition: "SIZE VALUE [VALUE...]".

# median FILE SIZE [COLUMN]: median of COLUMN (default 2) over the lines of SIZE
median() {
    awk -v s="$2" -v c="${3:-2}" '$1 == s { print $c }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a";
             else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR/2] + v[NR/2 + 1]) / 2 }'
}

# spread FILE SIZE: "min-max" of column 2 over the repetitions, so noise is visible
spread() {
    awk -v s="$2" '$1 == s { print $2 }' "$1" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR > 1) printf "%s-%s\n", v[1], v[NR]; else print "-" }'
}

# human BYTES: 8 B, 4 KiB, 16 MiB
human() {
    awk -v b="$1" 'BEGIN { if (b >= 1048576) printf "%g MiB", b / 1048576;
                           else if (b >= 1024) printf "%g KiB", b / 1024; else printf "%d B", b }'
}

# ratio A B: A / B with two decimals, n/a when either is missing
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'
}
