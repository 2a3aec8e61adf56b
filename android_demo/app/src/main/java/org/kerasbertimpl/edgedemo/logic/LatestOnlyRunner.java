package org.kerasbertimpl.edgedemo.logic;

import java.util.concurrent.Executor;

/**
 * Runs one prediction at a time off the UI thread and, while one runs, keeps only the newest
 * request: typing or pasting during a prediction never queues up stale work, never runs two
 * interpreters at once (neither MediaPipe's classifier nor a LiteRT interpreter is
 * thread-safe), and the screen only shows the result for the text it holds.
 *
 * <p>Example: {@code runner = new LatestOnlyRunner<>(Executors.newSingleThreadExecutor(), classify, listener);
 * runner.submit(text);}
 */
public final class LatestOnlyRunner<I, O> {
    /** The work: any exception becomes Listener.onError, never a crash. */
    public interface Task<I, O> {
        O run(I input) throws Exception;
    }

    public interface Listener<I, O> {
        /** superseded: a newer input was submitted meanwhile (and will run next). */
        void onResult(I input, O output, long nanos, boolean superseded);

        void onError(I input, Exception error, boolean superseded);
    }

    private final Executor worker;
    private final Task<I, O> task;
    private final Listener<I, O> listener;
    private boolean running;
    private boolean hasPending;
    private I pending;
    private int dropped;

    public LatestOnlyRunner(Executor worker, Task<I, O> task, Listener<I, O> listener) {
        this.worker = worker;
        this.task = task;
        this.listener = listener;
    }

    /** Asks for input to be classified; returns at once. */
    public synchronized void submit(I input) {
        if (hasPending) {
            dropped++;
        }
        pending = input;
        hasPending = true;
        if (!running) {
            startNext();
        }
    }

    /** Inputs replaced by a newer one before they ran (for the tests and a debug line). */
    public synchronized int dropped() {
        return dropped;
    }

    public synchronized boolean busy() {
        return running;
    }

    private void startNext() {
        final I input = pending;
        pending = null;
        hasPending = false;
        running = true;
        worker.execute(() -> runOne(input));
    }

    private void runOne(I input) {
        O output = null;
        Exception error = null;
        long start = System.nanoTime();
        try {
            output = task.run(input);
        } catch (Exception e) {
            error = e;
        }
        long nanos = System.nanoTime() - start;
        boolean superseded;
        synchronized (this) {
            superseded = hasPending;
        }
        try {
            if (error == null) {
                listener.onResult(input, output, nanos, superseded);
            } else {
                listener.onError(input, error, superseded);
            }
        } finally {
            synchronized (this) {
                if (hasPending) {
                    startNext();
                } else {
                    running = false;
                }
            }
        }
    }
}
