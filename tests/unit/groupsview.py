"""A groups view (``net.inet.tcp.reuseport_lb.groups``) in the older format
of the 14 series, as ``rxl inspect`` still reads it: two members, two
receiving CPUs (the counts of the learning page's one-worker-per-CPU runs),
largest-remainder supply 16/16, after the console's login line."""

VIEW14 = """\
login: sysctl -n net.inet.tcp.reuseport_lb.groups
group port 8080 af inet members 2 gen 5 map 32 dirty 0 rebuilds 3 allocfail 0
learn window_ms 10000 age_ms 4210 rolls 7
rx 0 prev 6756 cur 3301
rx 4 prev 6793 cur 3350
member 0 tag 0 learned slots 16
member 1 tag 4 explicit slots 16
cpu 0 offset 0 slots 16
cpu 4 offset 16 slots 16
"""
