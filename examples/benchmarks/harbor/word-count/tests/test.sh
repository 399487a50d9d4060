#!/bin/bash
# Harbor's contract: the reward goes to /logs/verifier/reward.txt
want=$(wc -w < /app/poem.txt | tr -d ' ')
got=$(tr -d ' \n' < /app/count.txt 2>/dev/null)
if [ "$got" = "$want" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
