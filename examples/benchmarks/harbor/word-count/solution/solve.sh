#!/bin/bash
cd /app
wc -w < poem.txt | tr -d ' ' > count.txt
