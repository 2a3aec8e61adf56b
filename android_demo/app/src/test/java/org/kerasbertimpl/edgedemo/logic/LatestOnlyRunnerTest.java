package org.kerasbertimpl.edgedemo.logic;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.Test;

/** Typing and pasting while a prediction runs: one at a time, only the newest waits, errors are reported. */
public class LatestOnlyRunnerTest {

    @Test
    public void inputsArrivingDuringAPredictionCollapseToTheNewest() throws Exception {
        ExecutorService worker = Executors.newSingleThreadExecutor();
        CountDownLatch firstStarted = new CountDownLatch(1);
        CountDownLatch releaseFirst = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(2);
        List<String> ran = Collections.synchronizedList(new ArrayList<>());
        List<String> shown = Collections.synchronizedList(new ArrayList<>());
        LatestOnlyRunner<String, Integer> runner = new LatestOnlyRunner<>(worker, text -> {
            ran.add(text);
            if (text.equals("first")) {
                firstStarted.countDown();
                releaseFirst.await(10, TimeUnit.SECONDS);
            }
            return text.length();
        }, new LatestOnlyRunner.Listener<String, Integer>() {
            @Override
            public void onResult(String input, Integer output, long nanos, boolean superseded) {
                shown.add(input + (superseded ? " (superseded)" : "") + " " + output);
                done.countDown();
            }

            @Override
            public void onError(String input, Exception error, boolean superseded) {
                shown.add("error " + input);
                done.countDown();
            }
        });
        runner.submit("first");
        assertTrue(firstStarted.await(10, TimeUnit.SECONDS));
        runner.submit("paste 1");
        runner.submit("paste 2");
        runner.submit("newest text");
        assertTrue(runner.busy());
        releaseFirst.countDown();
        assertTrue(done.await(10, TimeUnit.SECONDS));
        worker.shutdown();
        assertTrue(worker.awaitTermination(10, TimeUnit.SECONDS));
        assertEquals(List.of("first", "newest text"), ran);
        assertEquals(List.of("first (superseded) 5", "newest text 11"), shown);
        assertEquals(2, runner.dropped());
        assertFalse(runner.busy());
    }

    @Test
    public void anExceptionIsReportedAndTheRunnerGoesOn() throws Exception {
        ExecutorService worker = Executors.newSingleThreadExecutor();
        CountDownLatch done = new CountDownLatch(2);
        List<String> shown = Collections.synchronizedList(new ArrayList<>());
        LatestOnlyRunner<String, Integer> runner = new LatestOnlyRunner<>(worker, text -> {
            if (text.isEmpty()) {
                throw new IllegalStateException("the interpreter failed");
            }
            return text.length();
        }, new LatestOnlyRunner.Listener<String, Integer>() {
            @Override
            public void onResult(String input, Integer output, long nanos, boolean superseded) {
                shown.add("ok " + output);
                done.countDown();
            }

            @Override
            public void onError(String input, Exception error, boolean superseded) {
                shown.add("error " + error.getMessage());
                done.countDown();
            }
        });
        runner.submit("");
        // Submitted after the first finished or while it runs: either way it runs.
        Thread.sleep(50);
        runner.submit("abc");
        assertTrue(done.await(10, TimeUnit.SECONDS));
        worker.shutdown();
        assertEquals(List.of("error the interpreter failed", "ok 3"), shown);
    }
}
